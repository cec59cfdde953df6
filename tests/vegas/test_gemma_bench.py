"""The Gemma benchmark's parts on tiny inputs: forward counting, prompts, the cost model's fit, the --model
switch (the Gemma run itself is `hf-ext bench vegas --model gemma-3-270m`, never part of the suite)."""

from __future__ import annotations

import math

import pytest
import torch

from hf_ext.testing import requires

pytestmark = requires("transformers")


@pytest.mark.slow
def test_forward_log_counts_each_decode_forward_with_its_shape():
    from benchmarks.vegas.gemma import ForwardLog
    from hf_ext.testing import tiny_llama

    lm = tiny_llama()
    log = ForwardLog(lm)
    ids = torch.randint(3, 64, (2, 10))
    with log.record() as calls:
        lm.generate(ids, max_new_tokens=3, do_sample=False)
    log.remove()
    assert [c[:2] for c in calls] == [(2, 10), (2, 1), (2, 1)]
    assert [c[3] for c in calls] == [0, 10, 11] and len(log.seconds) == 3 and min(log.seconds) > 0


def test_prompts_are_shifted_windows_of_the_stream_and_refuse_too_little_text():
    from benchmarks.vegas.gemma import ROW_SHIFT, prompts

    stream = torch.arange(2 * ROW_SHIFT + 50)
    p = prompts(stream, 40, 3)
    assert p.shape == (3, 40) and bool((p[:, 0] == 0).all())
    assert p[1, 1:].tolist() == list(range(1 + ROW_SHIFT, ROW_SHIFT + 40))
    with pytest.raises(ValueError, match="`n`=60 x batch 3 needs"):
        prompts(stream, 60, 3)


def test_fit_recovers_fixed_and_flop_costs_at_a_known_read_rate():
    from benchmarks.vegas.gemma import fit

    bw, c, flops = 1e9, 2e-3, 5e10
    points = [
        (f, b, x, f * c + b / bw + x / flops) for f, b, x in ((1, 1e9, 1e9), (1, 1.1e9, 7e9), (2, 2e9, 3e9))
    ]
    got_c, got_flops = fit(points, bw)
    assert math.isclose(got_c, c, rel_tol=1e-6) and math.isclose(got_flops, flops, rel_tol=1e-6)


def test_flop_terms_make_a_wide_verify_dearer_than_its_bytes_alone():
    from hf_ext.vegas.core import predicted_speedup

    kw = dict(weight_bytes=1e9, entry_bytes=2048, windows=[512, None], context=4096, batch=1, gamma=4,
              budget_k=287, acceptance=0.8)  # fmt: skip
    bytes_only = predicted_speedup(**kw)
    with_flops = predicted_speedup(**kw, body_params=1e8, head_params=1.5e8, byte_rate=1e10, flop_rate=5e10)
    assert with_flops < bytes_only < 1.0
    assert predicted_speedup(**kw, accepted_length=5.0) == pytest.approx(
        bytes_only * 5.0 / ((1 - 0.8**5) / 0.2)
    )


def test_bench_run_refuses_an_unknown_model():
    from benchmarks.vegas.bench import run

    with pytest.raises(ValueError, match="`model` must be 'gemma-3-270m'.*got 'llama'"):
        run(quick=True, model="llama")
