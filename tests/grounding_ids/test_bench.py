import torch

from benchmarks.grounding_ids.bench import SIZE
from benchmarks.grounding_ids.train import (
    _held_out,
    _questions,
    answer_prior,
    random_guess,
    scene_majority,
    text_only,
)
from hf_ext.grounding_ids.synthetic import make_binding_task, vocabulary


def test_held_out_question_has_the_training_prefix_form():
    # The benchmark scores the first question only (later ones can be answered by elimination), read at the
    # question's symbol token; the held-out prompt must be a training prompt cut right after that symbol.
    train = make_binding_task(16, **SIZE.task_kwargs(rows=(4,), seed=0))
    test = _held_out(SIZE, 16)
    for p, q in zip(train.prompts, test.prompts):
        cut = p.split()[: p.split().index("?")]
        assert len(cut) == len(q.split()) and cut[:4] == q.split()[:4] and q.split()[-2] == "row"
        assert q.split()[-1] in vocabulary(4)[-9:-5]  # ends with a symbol


def test_answers_are_read_at_the_question_symbols():
    from hf_ext._tokenizers import word_level_tokenizer

    tok = word_level_tokenizer(
        ["<pad>", "<image>", *vocabulary(4)], unk_token="<image>", split="whitespace_split"
    )
    task = make_binding_task(3, **SIZE.task_kwargs(rows=(4,), seed=1))
    ids = torch.tensor([tok(p)["input_ids"] for p in task.prompts])
    pos, lab = _questions(task, ids, tok.convert_tokens_to_ids("row"))
    for i in range(3):
        words = task.prompts[i].split()
        assert [words[int(p)] for p in pos[i]] == [task.row_symbols[i][r] for r, _ in task.qa[i]]
        assert [task.answer_words[int(k)] for k in lab[i]] == [a for _, a in task.qa[i]]


def test_trivial_baselines_sit_at_chance():
    # Held-out scenes hold each colour once: no count, prior or text answers better than 1 in 4.
    for value in (answer_prior(SIZE, 256), scene_majority(SIZE, 256), random_guess(SIZE, 256)):
        assert 0.17 < value < 0.33
    assert text_only(SIZE, 256, 1024) < 0.33


def test_last_question_is_solvable_by_elimination():
    task = make_binding_task(64, **SIZE.task_kwargs(rows=(4,), seed=0))
    for colours, pairs in zip(task.row_colours, task.qa):
        rest = list(colours)
        for _, answer in pairs[:-1]:
            rest.remove(answer)
        assert rest == [pairs[-1][1]]


def test_quick_plan_is_a_smaller_slice_of_the_full_grid():
    from benchmarks.grounding_ids.bench import FULL_RUN_CLAIM, _plan, _what, grid

    quick, full = _plan(quick=True, seed=0), _plan(quick=False, seed=0)
    assert len(grid()) == 1 and grid()[0]["image_px"] == SIZE.image_size
    assert quick.steps < full.steps and len(quick.seeds) < len(full.seeds) and quick.n_train < full.n_train
    assert quick.evals[-1] == quick.steps and full.evals[-1] == full.steps  # accuracy is read at the end
    assert _what(quick).endswith(f"(full: 3 seeds x 1200 steps; {FULL_RUN_CLAIM})")
    assert FULL_RUN_CLAIM.startswith("claim shown at full size only (last full run: claim met")
