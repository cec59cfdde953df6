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
        make_binding_task(2, rows=(2, 4), questions=5)
    with pytest.raises(ValueError, match="`empty_prob`"):
        make_binding_task(2, empty_prob=1.0)
    with pytest.raises(ValueError, match="`n`"):
        make_binding_task(0)
    with pytest.raises(ValueError, match=r"`distinct_colours`.*rows=\[5\]"):
        make_binding_task(2, rows=(5,), object_size=4, distinct_colours=True)
    with pytest.raises(ValueError, match="`distinct_colours`.*empty_prob=0.1"):
        make_binding_task(2, distinct_colours=True, empty_prob=0.1)
    with pytest.raises(ValueError, match="`object_width`"):
        make_binding_task(2, object_width=33)
    with pytest.raises(ValueError, match="`left_margin`"):
        make_binding_task(2, object_width=32, left_margin=8)


def test_distinct_colours_leave_no_scene_statistic_that_answers():
    # Every 4-strip scene holds each colour once, so its colour counts are always (1, 1, 1, 1): the answer
    # given the counts is the answer overall, which is balanced over the 4 colours (400 / 4 = 100 each).
    task = make_binding_task(400, rows=(4,), distinct_colours=True, shuffle_symbols=True, seed=5)
    by_counts: dict[tuple[int, ...], list[str]] = {}
    for colours, answer in zip(task.row_colours, task.answers):
        assert sorted(colours) == sorted(COLOURS)
        by_counts.setdefault(tuple(colours.count(c) for c in COLOURS), []).append(answer)
    assert list(by_counts) == [(1, 1, 1, 1)]
    tally = [by_counts[(1, 1, 1, 1)].count(c) for c in COLOURS]
    assert sum(tally) == 400 and all(80 <= t <= 120 for t in tally), tally
    # ... and the answer is a function of the asked strip: the same scene asked about another strip differs
    for colours, pairs in zip(task.row_colours, task.qa):
        strip, answer = pairs[0]
        assert answer == colours[strip] and all(colours[r] != answer for r in range(4) if r != strip)


def test_bars_cover_their_strip_under_the_glyph():
    task = make_binding_task(
        6, rows=(4,), object_width=32, left_margin=0, distinct_colours=True, noise=0.0, seed=2
    )
    for i in range(6):
        img = task.images[i].permute(1, 2, 0).numpy()
        for r, colour in enumerate(task.row_colours[i]):
            strip = img[8 * r : 8 * r + 8]
            hits = (strip == np.array(COLOURS[colour])).all(-1)
            assert hits.sum() == 5 * 32 and hits.all(1).sum() == 5  # 5 full rows of 32 px, column 0 included


def test_fewer_strips_than_questions_ask_every_strip():
    task = make_binding_task(40, rows=(1, 2, 4), questions=4, distinct_colours=True, seed=4)
    for k, pairs in zip(task.n_rows, task.qa):
        assert sorted(r for r, _ in pairs) == list(range(int(k)))
