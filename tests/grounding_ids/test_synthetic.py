import numpy as np
import pytest

from hf_ext.grounding_ids.core import cuts
from hf_ext.grounding_ids.synthetic import COLOURS, make_binding_task, vocabulary


def test_each_strip_holds_its_square_and_the_answer_matches():
    task = make_binding_task(
        20, image_size=32, rows=(2, 3, 4), empty_prob=0.2, questions=2, noise=0.0, seed=3
    )
    assert task.images.shape == (20, 3, 32, 32)
    for i in range(20):
        img = task.images[i].permute(1, 2, 0).numpy()
        ys = cuts(0, 32, int(task.n_rows[i]))
        for r, colour in enumerate(task.row_colours[i]):
            strip = img[ys[r] : ys[r + 1]]
            hits = (strip[..., None, :] == np.array(list(COLOURS.values()))).all(-1).sum((0, 1))
            if colour == "none":
                assert hits.sum() == 0
            else:
                assert hits[list(COLOURS).index(colour)] == 25 and hits.sum() == 25  # one 5x5 square
        assert task.answers[i] == task.row_colours[i][task.target[i]]
        assert len(task.qa[i]) == 2 and task.qa[i][-1] == (task.target[i], task.answers[i])
        words = task.prompts[i].split()
        assert words[0] == "<image>" and words[-1] == "?" and set(words[1:]) <= set(vocabulary(4))
        assert words[-2] == task.row_symbols[i][task.target[i]]


def test_shuffled_symbols_are_listed_in_strip_order():
    task = make_binding_task(30, rows=(4,), shuffle_symbols=True, seed=1)
    assert len(set(task.row_symbols)) > 1
    for prompt, symbols in zip(task.prompts, task.row_symbols):
        assert " ".join(symbols) in prompt


def test_same_seed_same_task():
    a, b = make_binding_task(4, seed=7), make_binding_task(4, seed=7)
    assert (a.images == b.images).all() and a.prompts == b.prompts


def test_bad_inputs_name_the_argument():
    with pytest.raises(ValueError, match="`object_size`"):
        make_binding_task(2, image_size=32, rows=(4,), object_size=8)
    with pytest.raises(ValueError, match=r"`rows\[0\]`"):
        make_binding_task(2, rows=(9,))
    with pytest.raises(ValueError, match="`questions`"):
        make_binding_task(2, rows=(2, 4), questions=3)
    with pytest.raises(ValueError, match="`empty_prob`"):
        make_binding_task(2, empty_prob=1.0)
    with pytest.raises(ValueError, match="`n`"):
        make_binding_task(0)
