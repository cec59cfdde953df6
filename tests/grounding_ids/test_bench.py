from benchmarks.grounding_ids.train import TaskSize, answer_prior, scene_majority
from hf_ext.grounding_ids.synthetic import make_binding_task


def test_held_out_first_question_has_the_training_prefix_form():
    # The benchmark scores the first question only (later ones can be answered by elimination); its
    # one-question prompt must look exactly like a training prompt cut after the first "?".
    four = make_binding_task(16, questions=4, seed=0).prompts
    one = make_binding_task(16, questions=1, seed=1).prompts
    cut = [p[: p.index("?") + 1] for p in four]
    assert {len(p.split()) for p in cut} == {len(p.split()) for p in one}
    assert all(p.split()[:-2] == q.split()[:-2] for p, q in zip(cut, one))  # same hint, same words


def test_last_question_is_solvable_by_elimination():
    task = make_binding_task(64, questions=4, seed=0)
    for colours, pairs in zip(task.row_colours, task.qa):
        rest = list(colours)
        for _, answer in pairs[:-1]:
            rest.remove(answer)
        assert rest == [pairs[-1][1]]


def test_trivial_baselines():
    size = TaskSize()
    assert 0.2 < answer_prior(size, 256) < 0.35
    assert 0.4 < scene_majority(size, 256) < 0.6  # no binding needed


def test_quick_plan_is_a_smaller_slice_of_the_full_grid():
    from benchmarks.grounding_ids.bench import _plan, grid

    quick, full = _plan(quick=True, seed=0), _plan(quick=False, seed=0)
    assert len(grid()) == 1 and grid()[0]["image_px"] == TaskSize().image_size
    assert quick.steps < full.steps and len(quick.seeds) < len(full.seeds) and quick.n_train < full.n_train
    assert quick.evals[-1] == quick.steps and full.evals[-1] == full.steps  # accuracy is read at the end
