"""The Vegas benchmark's counted costs: the cost model's fit and shares, and the attention-mass replay."""

from __future__ import annotations

import pytest
import torch

from hf_ext.testing import requires

PARAM_BYTES, KV_ENTRY = 1000, 10


def _row(system, forwards, kv_per_token, pairs, extra=0.0, context=64, batch=2, new=4, **kw):
    return {"system": system, "context": context, "batch": batch, "new": new, "forwards": forwards,
            "kv_entries_per_token": kv_per_token, "_pairs": pairs, "_extra_entries": extra, **kw}  # fmt: skip


def _seconds(row, c, bw, p):
    from benchmarks.vegas.bench import cost_terms

    f, nbytes, pairs = cost_terms(row, PARAM_BYTES, KV_ENTRY)
    return f * c + nbytes / bw + pairs * p


def _grid(c=1e-3, bw=1e6, p=1e-6):
    from benchmarks.vegas.bench import MODEL_BASE

    rows, calibration = [], []
    for context, batch in ((64, 1), (64, 8), (512, 8)):
        plain = _row(MODEL_BASE, 4, 3.0 * context, 4.0 * context * batch, context=context, batch=batch)
        plain["tokens_per_s"] = batch * 4 / _seconds(plain, c, bw, p)
        rows.append(plain)
        entries = batch * 3 * context
        cal = {"context": context, "batch": batch, "forwards": 2, "kv_entries": 2 * entries,
               "pairs": 7 * 2 * entries}  # fmt: skip
        cal["seconds"] = 2 * c + (2 * PARAM_BYTES + 2 * entries * KV_ENTRY) / bw + cal["pairs"] * p
        calibration.append(cal)
    return rows, calibration


def test_fit_recovers_the_three_terms_from_plain_arms_and_calibration():
    from benchmarks.vegas.bench import fit_cost_model

    rows, calibration = _grid(c=2e-3, bw=5e6, p=3e-7)
    c, bw, p = fit_cost_model(rows, calibration, PARAM_BYTES, KV_ENTRY)
    assert (c, bw, p) == pytest.approx((2e-3, 5e6, 3e-7), rel=1e-6)


def test_a_negative_term_is_dropped_and_the_rest_refitted():
    from benchmarks.vegas.bench import fit_cost_model

    rows, calibration = _grid(c=0.0, bw=5e6, p=0.0)
    for cal in calibration:  # a chunk forward cheaper than its bytes: the pair term would come out negative
        cal["seconds"] *= 0.8
    c, bw, p = fit_cost_model(rows, calibration, PARAM_BYTES, KV_ENTRY)
    assert p == 0.0 and c >= 0.0 and 0 < bw < float("inf")


def test_apply_predicts_a_draft_arm_and_reports_shares_at_the_largest_setting():
    from benchmarks.vegas.bench import MODEL_BASE, apply_cost_model

    rows, calibration = _grid()
    arm = _row("vegas", 10, 100.0, 9000.0, extra=500.0, context=512, batch=8)
    arm["tokens_per_s"] = 8 * 4 / (2 * _seconds(arm, 1e-3, 1e6, 1e-6))  # measured: twice the model's time
    (c, bw, p), shares, c_loop, rates = apply_cost_model([*rows, arm], calibration, PARAM_BYTES, KV_ENTRY)
    assert (c, bw, p) == pytest.approx((1e-3, 1e6, 1e-6), rel=1e-6) and c_loop == {}
    assert rates == {(r["context"], r["batch"]): bw for r in rows}  # no one-row timings: the fitted rate
    assert all(r["model_ratio"] == pytest.approx(1.0) for r in rows)
    assert arm["model_vs_measured"] == pytest.approx(2.0)
    assert set(shares) == {MODEL_BASE, "vegas"}
    assert sum(shares["vegas"].values()) == pytest.approx(1.0)
    assert arm["kv_MB_per_token"] == pytest.approx(100.0 * KV_ENTRY / 1e6)


def test_a_draft_forward_costs_the_loops_own_time_from_its_short_context_timing():
    from benchmarks.vegas.bench import apply_cost_model, loop_forward_cost

    rows, calibration = _grid()
    # the loop at a short context: 30 forwards whose fixed cost is 3 ms each, plus its bytes and arithmetic
    loop = {"batch": 8, "forwards": 30, "kv_entries": 4000.0, "extra_entries": 1000.0, "pairs": 20000.0}
    loop["seconds"] = 30 * 3e-3 + (30 * PARAM_BYTES + 5000 * KV_ENTRY) / 1e6 + 20000 * 1e-6
    assert loop_forward_cost(loop, (1e-3, 1e6, 1e-6), PARAM_BYTES, KV_ENTRY) == pytest.approx(3e-3)
    arm = _row("vegas", 10, 100.0, 9000.0, extra=500.0, context=512, batch=8)
    plain_like = _seconds(arm, 1e-3, 1e6, 1e-6)
    arm["tokens_per_s"] = 8 * 4 / (plain_like + 10 * (3e-3 - 1e-3))  # measured: forwards at the loop's cost
    _, _, c_loop, _ = apply_cost_model([*rows, arm], calibration, PARAM_BYTES, KV_ENTRY, [loop])
    assert c_loop == {8: pytest.approx(3e-3)}
    assert arm["model_vs_measured"] == pytest.approx(1.0)
    assert all(r["model_ratio"] == pytest.approx(1.0) for r in rows)  # plain arms keep c


def test_each_setting_prices_bytes_at_its_own_read_rate():
    from benchmarks.vegas.bench import apply_cost_model, byte_rates

    rows, calibration = _grid()
    fast = next(x for x in calibration if (x["context"], x["batch"]) == (512, 8))
    fast["one_row_pairs"] = 1000.0
    fast["one_row_seconds"] = fast["kv_entries"] * KV_ENTRY / 2e6 + 1000.0 * 1e-6  # reads at 2 MB/s, not 1
    rates = byte_rates(calibration, 1e-6, KV_ENTRY, 1e6)
    assert rates.pop((512, 8)) == pytest.approx(2e6) and set(rates.values()) == {1e6}
    arm = _row("vegas", 10, 100.0, 9000.0, context=512, batch=8)
    plain = next(r for r in rows if (r["context"], r["batch"]) == (512, 8))
    arm["tokens_per_s"] = plain["tokens_per_s"]
    apply_cost_model([*rows, arm], calibration, PARAM_BYTES, KV_ENTRY)
    # both sides of the ratio at the setting's rate: the plain arm's many bytes are cheaper than at 1 MB/s
    expected = _seconds(plain, 1e-3, 2e6, 1e-6) / _seconds(arm, 1e-3, 2e6, 1e-6)
    assert arm["model_ratio"] == pytest.approx(expected)
    assert expected < _seconds(plain, 1e-3, 1e6, 1e-6) / _seconds(arm, 1e-3, 1e6, 1e-6)


@requires("transformers")
def test_attention_mass_is_bounded_by_the_per_step_top_k_and_full_under_a_whole_cache_budget():
    from benchmarks.vegas.attention_mass import attention_mass
    from hf_ext import VegasConfig
    from hf_ext.testing import tiny_llama

    lm = tiny_llama(hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2)
    ids = torch.randint(3, 64, (2, 96), generator=torch.Generator().manual_seed(0))
    mass = attention_mass(lm, ids, VegasConfig(num_draft_tokens=3, sparse_ratio=0.1, min_tokens=8))
    top = mass["per-step top-k"]["mean"]
    assert 0 < mass["vegas"]["mean"] <= top + 1e-6 and mass["vegas, per KV head"]["mean"] <= top + 1e-6
    assert all(v["worst_head"] <= v["mean"] + 1e-6 for v in mass.values())
    whole = attention_mass(lm, ids, VegasConfig(num_draft_tokens=3, min_tokens=96))
    assert all(v["mean"] == pytest.approx(1.0, abs=1e-5) for v in whole.values())
    assert lm.config._attn_implementation == "sdpa"


def test_verdicts_name_only_the_rivals_that_ran():
    from benchmarks.vegas.bench import _verdicts

    full = _verdicts([_arm("vegas", 0.3, 0.5), _arm("sink+window", 0.1, 0.4), _arm("quest", 0.6, 0.45)])
    assert "Vegas alpha >= sink+window and Quest: MISSED" in full[1]
    assert full[3].startswith("N=64 batch 8: Vegas >= 1.1x the best other sparse self-draft: MET (1.11x)")
    assert len(full) == 4  # no gamma sweep ran: no tuned verdicts
    quick = _verdicts([_arm("vegas", 0.3, 0.5), _arm("sink+window", 0.1, 0.4)])
    assert "Vegas alpha >= sink+window: MET" in quick[1] and "Quest" not in quick[1]


def _arm(arm, alpha, ratio, gamma=6, identical=True):
    system = arm if gamma == 6 else f"{arm} (gamma {gamma})"
    return {"system": system, "_arm": arm, "gamma": gamma, "identical": identical, "context": 64, "batch": 8,
            "alpha": alpha, "tokens_per_s_ratio": ratio, "tokens_per_s": 100 * ratio}  # fmt: skip


def test_tuned_verdicts_take_every_sparse_arm_at_its_fastest_gamma():
    from benchmarks.vegas.bench import _verdicts

    rows = [_arm("vegas", 0.3, 0.5), _arm("quest", 0.6, 0.45), _arm("full-kv oracle", 1.0, 0.9),
            _arm("vegas", 0.7, 1.4, gamma=2), _arm("quest", 0.8, 0.6, gamma=1),
            _arm("quest", 0.7, 0.55, gamma=2, identical=False)]  # fmt: skip
    notes = _verdicts(rows)
    assert notes[0].endswith("MISSED (5/6 runs identical)")
    assert "Vegas alpha >= Quest: MISSED (0.300 vs quest 0.600)" in notes[1]  # the default gamma only
    assert notes[-2] == (
        "N=64 batch 8, each sparse arm at its fastest gamma: Vegas >= 1.3x the best plain greedy: "
        "MET (1.40x at gamma 2)"
    )
    assert notes[-1].endswith("Vegas >= 1.1x the best other sparse self-draft: MET (2.33x quest at gamma 1)")


def test_headline_takes_vegas_at_its_fastest_gamma_against_every_baseline_row():
    from benchmarks.vegas.bench import PLAIN, headline

    def base(system, tps, **kw):
        return {"system": system, "is_baseline": True, "context": 64, "batch": 8, "tokens_per_s": tps, **kw}

    rows = [base(PLAIN, 80.0), base("sink+window (gamma 1)", 85.0, _arm="sink+window"),
            base("full-kv oracle", 200.0, _arm="full"), base(PLAIN, 999.0, context=32),
            {**_arm("vegas", 0.3, 0.7), "is_baseline": False, "tokens_per_s": 60.0},
            {**_arm("vegas", 0.6, 1.1, gamma=3), "is_baseline": False, "tokens_per_s": 95.0}]  # fmt: skip
    head = headline(rows, (64, 8))
    assert (head.method, head.best_baseline) == (95.0, 85.0)
    assert head.best_baseline_system == "sink+window (gamma 1)"


def test_a_vegas_verify_costs_the_timed_selection_and_other_arms_do_not():
    from benchmarks.vegas.bench import apply_cost_model

    rows, calibration = _grid()
    for cal in calibration:
        cal["selection_seconds"] = 2e-3 if (cal["context"], cal["batch"]) == (512, 8) else 0.0
    arms = []
    for name in ("vegas", "sink+window"):
        arm = _row(name, 10, 100.0, 9000.0, extra=500.0, context=512, batch=8, _arm=name, _verifies=4)
        arm["tokens_per_s"] = (
            8 * 4 / (_seconds(arm, 1e-3, 1e6, 1e-6) + (4 * 2e-3 if name == "vegas" else 0.0))
        )
        arms.append(arm)
    _, shares, _, _ = apply_cost_model([*rows, *arms], calibration, PARAM_BYTES, KV_ENTRY)
    assert all(a["model_vs_measured"] == pytest.approx(1.0) for a in arms)
    assert shares["vegas"]["selection"] > 0 and shares["sink+window"]["selection"] == 0


def test_a_drafts_selection_costs_its_runs_at_the_timed_rate():
    from benchmarks.vegas.bench import apply_cost_model

    rows, calibration = _grid()
    for cal in calibration:
        cal["run_seconds"] = 5e-7 if (cal["context"], cal["batch"]) == (512, 8) else 0.0
    arms = []
    for name, runs in (("vegas", 3000.0), ("sink+window", 10.0)):
        arm = _row(name, 10, 100.0, 9000.0, extra=0.0, context=512, batch=8, _arm=name, _runs=runs)
        arm["tokens_per_s"] = 8 * 4 / (_seconds(arm, 1e-3, 1e6, 1e-6) + runs * 5e-7)
        arms.append(arm)
    _, shares, _, _ = apply_cost_model([*rows, *arms], calibration, PARAM_BYTES, KV_ENTRY)
    assert all(a["model_vs_measured"] == pytest.approx(1.0) for a in arms)
    assert shares["vegas"]["scatter"] > 100 * shares["sink+window"]["scatter"] > 0


def test_paired_summary_takes_each_rounds_ratio_then_their_median_and_range():
    from benchmarks.vegas.bench import paired_summary

    times = {"plain": [2.0, 3.0, 4.0, 2.0], "v": [1.0, 2.0, 2.0, 2.0], "q": [1.5, 2.0, 3.0, 3.0]}
    out = paired_summary(times, ("plain", "v", "q"))
    assert out["rounds"] == 4 and (out["plain"], out["vegas"], out["rival"]) == ("plain", "v", "q")
    assert out["vs_plain"] == {"median": 1.75, "min": 1.0, "max": 2.0}  # ratios 2, 1.5, 2, 1
    assert out["vs_rival"] == {"median": 1.5, "min": 1.0, "max": 1.5}  # ratios 1.5, 1, 1.5, 1.5


def test_paired_summary_rejects_rounds_of_unequal_length():
    from benchmarks.vegas.bench import paired_summary

    with pytest.raises(ValueError, match="same number"):
        paired_summary({"p": [1.0, 2.0], "v": [1.0], "q": [1.0]}, ("p", "v", "q"))
    with pytest.raises(ValueError, match="same number"):
        paired_summary({"p": [], "v": [], "q": []}, ("p", "v", "q"))


def test_paired_rounds_rotate_the_order_and_stop_starting_rounds_past_the_budget():
    from benchmarks.vegas.bench import paired_rounds

    calls = []

    def decode(system):
        calls.append(system)
        return {"p": 3.0, "v": 2.0, "q": 2.5}[system]

    out = paired_rounds(decode, ("p", "v", "q"), 4, budget_s=1e9)
    assert calls == ["p", "v", "q", "v", "q", "p", "q", "p", "v", "p", "v", "q"]
    assert out["rounds"] == 4 and out["vs_plain"]["median"] == 1.5 and out["vs_rival"]["median"] == 1.25
    calls.clear()
    assert paired_rounds(decode, ("p", "v", "q"), 10, budget_s=0.0)["rounds"] == 3  # three always run


def test_paired_contenders_are_the_best_plain_arm_and_each_sparse_side_at_its_fastest_gamma():
    from benchmarks.vegas.bench import KERNEL, PLAIN, STATIC, paired_contenders

    seconds = {PLAIN: 3.0, STATIC: 4.0, KERNEL: 2.0, "vegas": 2.5, "vegas (gamma 1)": 1.5, "quest": 1.8,
               "quest (gamma 3)": 1.6, "sink+window (gamma 1)": 1.7, "full-kv oracle": 1.0}  # fmt: skip
    names = {"vegas": ("vegas", 6), "vegas (gamma 1)": ("vegas", 1), "quest": ("quest", 6),
             "quest (gamma 3)": ("quest", 3), "sink+window (gamma 1)": ("sink+window", 1),
             "full-kv oracle": ("full-kv oracle", 6)}  # fmt: skip
    # the oracle is faster than all, but not a rival
    assert paired_contenders(seconds, names) == (KERNEL, "vegas (gamma 1)", "quest (gamma 3)")
    with pytest.raises(ValueError, match="other than Vegas"):
        paired_contenders(seconds, {"vegas": ("vegas", 6), "full-kv oracle": ("full-kv oracle", 6)})


def test_paired_verdicts_judge_the_medians():
    from benchmarks.vegas.bench import _verdicts, paired_summary

    paired = paired_summary({"p": [1.6, 1.2], "v": [1.0, 1.0], "q": [1.0, 1.4]}, ("p", "v", "q"))
    rows = [_arm("vegas", 0.3, 0.5), {**_arm("vegas", 0.7, 1.4, gamma=1), "_paired": paired},
            _arm("quest", 0.6, 0.45)]  # fmt: skip
    notes = _verdicts(rows)
    assert notes[-2] == (
        "N=64 batch 8, median of 2 paired rounds (v vs p and q): Vegas >= 1.3x the best plain greedy: "
        "MET (1.40x; rounds 1.20-1.60x)"
    )
    assert notes[-1].endswith("the best other sparse self-draft: MET (1.20x; rounds 1.00-1.40x)")


def test_paired_alpha_interval_resamples_the_prompts_for_both_arms_alike():
    from benchmarks.vegas.bench import paired_alpha_interval

    assert paired_alpha_interval([(3, 4), (1, 2)], [(3, 4), (1, 2)]) == (0.0, 0.0, 0.0)
    d, lo, hi = paired_alpha_interval([(3, 4), (1, 2), (5, 6)], [(2, 4), (1, 2), (4, 6)])
    assert d == pytest.approx(9 / 12 - 7 / 12)
    assert 0 <= lo <= d <= hi <= 0.25  # never below: the method accepts at least as many in every prompt
    for method, rival, match in (([(1, 2)], [], "same prompts"), ([(0, 0)], [(1, 2)], "must draft a token")):
        with pytest.raises(ValueError, match=match):
            paired_alpha_interval(method, rival)


def test_acceptance_verdicts_judge_alpha_per_context_over_the_prompts():
    from benchmarks.vegas.bench import _acceptance_verdicts

    alpha = {"vegas": [(5, 6), (4, 6)], "sink+window": [(3, 6), (3, 6)], "quest": [(6, 6), (4, 6)]}
    by_position = {arm: [(2, 2), (1, 2)] for arm in alpha}
    counts = {"alpha": alpha, "by_position": by_position, "identical": [True] * 5 + [False]}
    notes = _acceptance_verdicts({4096: counts}, 2)
    assert notes[0].endswith("token-identical to plain greedy: MISSED (5/6 runs identical)")
    assert notes[1].startswith(
        "N=4096, 2 prompts each decoded alone (gamma 2): Vegas alpha >= sink+window and Quest: MISSED "
        "(0.750 vs sink+window 0.500, quest 0.833; Vegas - sink+window +0.250, 95% bootstrap interval over"
    )
    assert notes[2].endswith(
        "vegas 1.000 / 0.500 (reached 2 to 2); sink+window 1.000 / 0.500 (reached 2 to 2); "
        "quest 1.000 / 0.500 (reached 2 to 2)"
    )
    assert _acceptance_verdicts({}, 6) == []


def test_position_acceptance_counts_each_position_given_the_draft_before_it():
    from benchmarks.vegas.bench import position_acceptance

    trace = [(0, 0, 0, 3, 3), (0, 0, 0, 3, 1), (0, 0, 0, 3, 0), (0, 0, 0, 2, 2)]  # (..., drafted, accepted)
    assert position_acceptance(trace, 3) == [(3, 4), (2, 3), (1, 1)]


@requires("transformers")
def test_acceptance_pass_decodes_every_prompt_alone_and_prefills_later_blocks_into_the_cache():
    from benchmarks.vegas.bench import SPARSE, _prefill, acceptance_pass, prompts
    from hf_ext.testing import tiny_llama
    from hf_ext.vegas.cache import InPlaceCache

    lm, n, new = tiny_llama(vocab_size=256), 160, 6
    first = prompts(n, 2)
    base = InPlaceCache(lm.config, 2, n + new + 8)
    _prefill(lm, first, base)
    counts = acceptance_pass(lm, base, first, 3, new, 2)
    assert counts["identical"] == [True] * 3 * len(SPARSE)
    alpha, by_position = counts["alpha"], counts["by_position"]
    assert all(len(alpha[arm]) == 3 and all(d >= a >= 0 and d > 0 for a, d in alpha[arm]) for arm in SPARSE)
    for arm in SPARSE:  # the accepted tokens, summed over the positions, are the arm's accepted count
        assert len(by_position[arm]) == 2
        assert sum(a for a, _ in by_position[arm]) == sum(a for a, _ in alpha[arm])
    assert torch.equal(base.slots[0].keys[0, :, : n - 1], _prefilled(lm, prompts(n, 3)[2:], n + new + 8))
    with pytest.raises(ValueError, match="`n`=74 leaves no room"):
        prompts(74, 1)


def _prefilled(lm, prompt, length):
    from benchmarks.vegas.bench import _prefill
    from hf_ext.vegas.cache import InPlaceCache

    cache = InPlaceCache(lm.config, 1, length)
    _prefill(lm, prompt, cache)
    return cache.slots[0].keys[0, :, : prompt.shape[1] - 1]


def test_a_build_from_another_recipe_is_stale(tmp_path):
    import json

    from benchmarks.vegas import lm as byte_lm

    def recipe(**kw):
        (tmp_path / "recipe.json").write_text(json.dumps(kw))

    recipe(recipe_sha256=byte_lm.recipe_sha256())
    assert byte_lm.stale_recipe(tmp_path) is None
    recipe(arch=byte_lm.ARCH)  # a build from before the recipe hash
    assert "another recipe" in byte_lm.stale_recipe(tmp_path)
    shorter = (byte_lm.Stage(**{**vars(byte_lm.STAGES[0]), "steps": 1}), *byte_lm.STAGES[1:])
    recipe(recipe_sha256=byte_lm.recipe_sha256(shorter))
    assert byte_lm.stale_recipe(tmp_path) is not None
    recipe(recipe_sha256=byte_lm.recipe_sha256(seed=1))
    assert byte_lm.stale_recipe(tmp_path) is not None


def test_a_build_names_the_training_text_it_needs_for_a_byte_identical_rebuild(tmp_path):
    import hashlib
    import json

    from benchmarks.vegas import lm as byte_lm

    sources = byte_lm.stdlib_sources()
    text = b"\n".join(sources["train"].values())

    def recipe(**kw):
        (tmp_path / "recipe.json").write_text(json.dumps(kw))

    recipe(train_sha256=hashlib.sha256(text).hexdigest())
    assert byte_lm.other_training_text(tmp_path) is None
    recipe(train_sha256=hashlib.sha256(text + b"x").hexdigest())
    assert "another SHA-256" in byte_lm.other_training_text(tmp_path)
    recipe(train_bytes=len(text), held_out_files=len(sources["held_out"]))  # a build from before the hash
    assert byte_lm.other_training_text(tmp_path) is None
    recipe(train_bytes=len(text) + 694, held_out_files=len(sources["held_out"]))
    assert f"{len(text) + 694} and" in byte_lm.other_training_text(tmp_path)


def test_the_shipped_model_passes_its_checks_and_a_damaged_one_is_refused(tmp_path, monkeypatch):
    import shutil

    from benchmarks.vegas import lm as byte_lm

    assert byte_lm.byte_llama_path() == byte_lm.SHIPPED  # checksums and recipe hash agree
    copy = tmp_path / "byte_llama"
    shutil.copytree(byte_lm.SHIPPED, copy)
    with (copy / "model.safetensors").open("r+b") as f:
        f.seek(-1, 2)
        last = f.read(1)
        f.seek(-1, 2)
        f.write(b"\x00" if last != b"\x00" else b"\x01")
    monkeypatch.setattr(byte_lm, "SHIPPED", copy)
    with pytest.raises(
        RuntimeError, match=r"damaged \(model.safetensors fails its SHA-256 check\); restore it"
    ):
        byte_lm.byte_llama_path()


@pytest.mark.asset_rebuild
@requires("transformers")
def test_rebuilding_the_shipped_recipe_gives_the_shipped_bytes(tmp_path):
    """The shipped model is what its recipe builds (about 13 minutes on two cores: `make test-assets`), given
    the same training text (the running Python's standard library)."""
    from benchmarks.vegas.lm import SHIPPED, other_training_text, train

    other = other_training_text(SHIPPED)
    if other:
        pytest.skip(f"no byte comparison possible: {other}")
    train(tmp_path / "lm")
    for name in ("model.safetensors", "config.json"):
        assert (tmp_path / "lm" / name).read_bytes() == (SHIPPED / name).read_bytes(), name


def test_a_stage_warms_up_then_decays_to_zero():
    from benchmarks.vegas.lm import Stage

    stage = Stage(steps=10, batch=1, seq=8, lr=1.0, warmup=2)
    assert [stage.lr_at(i) for i in (0, 1, 2)] == [0.5, 1.0, 1.0]
    assert stage.lr_at(6) == pytest.approx(0.5)
    assert stage.lr_at(10) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.slow
@requires("transformers")
def test_train_runs_each_stage_and_records_the_recipe(tmp_path):
    from benchmarks.vegas.lm import Stage, stale_recipe, train
    from hf_ext.assets import verify_manifest

    stages = (
        Stage(steps=2, batch=2, seq=300, lr=1e-3, warmup=1),
        Stage(steps=1, batch=1, seq=600, lr=1e-3, warmup=1),
    )
    recipe = train(tmp_path / "lm", stages=stages)
    assert recipe["tokens"] == 2 * 2 * 300 + 600
    assert [s["seq"] for s in recipe["stages"]] == [300, 600]
    assert set(recipe["held_out_bits_per_byte_by_position"]) == {"0-512", "512-4096", "4096-8192"}
    assert verify_manifest(tmp_path / "lm") is None
    assert stale_recipe(tmp_path / "lm") is not None  # not the shipped stages


@pytest.mark.slow
@requires("transformers")
def test_train_builds_the_same_weights_when_mkl_may_not_use_avx512(tmp_path, monkeypatch):
    """A CPU without AVX-512, as MKL sees one: the pinned numerics build the same bytes (unpinned, MKL's
    AVX2 and AVX-512 kernels round differently and the weights differ)."""
    from benchmarks.vegas.lm import Stage, train

    stages = (Stage(steps=4, batch=2, seq=300, lr=1e-3, warmup=1),)
    train(tmp_path / "here", stages=stages)
    monkeypatch.setenv("MKL_ENABLE_INSTRUCTIONS", "AVX2")
    train(tmp_path / "avx2", stages=stages)
    here, avx2 = ((tmp_path / name / "model.safetensors").read_bytes() for name in ("here", "avx2"))
    assert here == avx2


def test_quick_decodes_the_smallest_grid_setting_as_the_full_run_does():
    from benchmarks.vegas.bench import FULL, QUICK, grid

    assert grid() == [{"context": n, "batch": b} for n in (4096, 16384, 32768) for b in (1, 8)]
    assert [{"context": n, "batch": b} for n in QUICK.contexts for b in QUICK.batches] == [grid()[0]]
    assert QUICK.new == FULL.new and "vegas" in QUICK.arms
    assert (QUICK.sweep, QUICK.acceptance) == ((), 0)


def test_quick_note_sets_vegas_forwards_and_phase_times_against_the_fastest_plain_arm():
    from benchmarks.vegas.bench import KERNEL, PLAIN, _quick_note

    def plain(system, tps):
        return {"system": system, "context": 64, "batch": 1, "forwards": 32, "tokens_per_s": tps,
                "kv_MB_per_token": 8.4}  # fmt: skip

    vegas = {**_arm("vegas", 0.8, 0.9), "batch": 1, "forwards": 38, "tau": 5.2, "tokens_per_s": 450.0,
             "kv_MB_per_token": 2.4, "_draft_ms": 1.3, "_verify_ms": 2.8}  # fmt: skip
    note = _quick_note([plain(PLAIN, 400.0), plain(KERNEL, 500.0), vegas], (64, 1))
    assert "2.4 MB of KV per token against 8.4 MB, with 1.19x the forwards (tau 5.20)" in note
    assert f"1.30 ms and a verify 2.80 ms against 2.00 ms per step of {KERNEL}" in note
