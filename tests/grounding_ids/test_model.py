import pytest
import torch

from hf_ext.grounding_ids.model import tiny_grounding_vlm
from hf_ext.grounding_ids.synthetic import make_binding_task, vocabulary


def test_verified_tiny_llava_has_65_image_tokens(vlm64):
    model, proc = vlm64
    enc = proc(images=[torch.zeros(3, 64, 64)], text=["<image> colour of row @ ?"], return_tensors="pt")
    assert int((enc["input_ids"] == proc.image_token_id).sum()) == 65
    out = model(**enc, output_attentions=True, output_hidden_states=True)
    assert out.attentions[0].shape[-1] == enc["input_ids"].shape[1]
    assert len(out.hidden_states) == 3


def test_default_strategy_drops_cls():
    _, proc = tiny_grounding_vlm(["a"], strategy="default", hidden_size=16, heads=2)
    enc = proc(images=[torch.zeros(3, 32, 32)], text=["<image> a"], return_tensors="pt")
    assert int((enc["input_ids"] == proc.image_token_id).sum()) == 16


def test_fifty_training_steps_reduce_the_loss():
    task = make_binding_task(64, questions=4, seed=0)
    model, proc = tiny_grounding_vlm(vocabulary(4), hidden_size=32, seed=0)
    enc = proc(images=list(task.images), text=task.prompts, return_tensors="pt")
    answer_ids = torch.tensor(proc.tokenizer.convert_tokens_to_ids(task.answer_words))
    qpos = torch.stack(
        [(row == proc.tokenizer.convert_tokens_to_ids("?")).nonzero().flatten() for row in enc["input_ids"]]
    )
    labels = torch.tensor([[task.answer_words.index(a) for _, a in qa] for qa in task.qa])
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3)
    torch.manual_seed(0)
    model.train()
    losses = []
    for _ in range(50):
        idx = torch.randint(0, 64, (16,))
        logits = model(**{k: v[idx] for k, v in enc.items()}).logits[:, :, answer_ids]
        picked = logits.gather(1, qpos[idx][..., None].expand(-1, -1, 5))
        loss = torch.nn.functional.cross_entropy(picked.flatten(0, 1), labels[idx].flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert all(torch.isfinite(torch.tensor(losses)))
    assert sum(losses[-10:]) / 10 < sum(losses[:10]) / 10


def test_bad_inputs_name_the_argument():
    with pytest.raises(ValueError, match="`strategy`"):
        tiny_grounding_vlm(["a"], strategy="cls")
    with pytest.raises(ValueError, match="`patch_size`"):
        tiny_grounding_vlm(["a"], image_size=8, patch_size=16)
    with pytest.raises(ValueError, match="`attn_implementation`"):
        tiny_grounding_vlm(["a"], attn_implementation="flash")
    with pytest.raises(ValueError, match="`initializer_range`"):
        tiny_grounding_vlm(["a"], initializer_range=0)
