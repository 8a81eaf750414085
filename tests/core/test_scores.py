"""Scores that repeats cannot inflate and that stay in their documented range."""

from __future__ import annotations

import numpy as np
import pytest

import labtwin
from labtwin.measurement import Measurement, Value, pool, pool_log_normal

GOOD = {"temperature_K": 335.0, "time_min": 40.0, "feed_conc_mol_L": 0.2, "catalyst_mol_pct": 4.0}


def test_pool_is_the_inverse_variance_mean() -> None:
    ms = [
        Measurement("ok", {"x": Value(1.0, "m", 0.1)}, experiment={"a": 1}),
        Measurement("ok", {"x": Value(2.0, "m", 0.2)}, experiment={"a": 1}),
    ]
    pooled = pool(ms)
    w = np.array([100.0, 25.0])
    assert pooled.observables["x"].value == pytest.approx((w @ [1.0, 2.0]) / w.sum(), rel=1e-12)
    assert pooled.observables["x"].uncertainty == pytest.approx(1 / np.sqrt(w.sum()), rel=1e-12)
    assert pooled.provenance["pooled_repeats"] == 2


def test_log_normal_observables_pool_in_log_space_the_rest_by_inverse_variance() -> None:
    """Two readings of 1 and 4 with error bars a fraction of each: the log-space pool is
    their geometric mean (2) times the log-normal mean correction, with the error bar of
    one reading at half the log-variance; a name not listed, a zero error bar or a
    non-positive reading falls back to the rule above."""
    rel = 0.2
    s2 = np.log1p(rel**2)

    def reading(v: float, sigma: float) -> Measurement:
        return Measurement("ok", {"d": Value(v, "ms", sigma), "t": Value(v, "K", sigma)})

    ms = [reading(1.0, rel), reading(4.0, 4 * rel)]
    pooled = pool(ms, log_normal=("d",))
    expected = 2.0 * np.exp(s2 / 2 - s2 / 4)  # m = ln 2 + s2 / 2, S^2 = s2 / 2
    assert pooled["d"] == pytest.approx(expected, rel=1e-12)
    assert pooled.observables["d"].uncertainty == pytest.approx(
        expected * np.sqrt(np.expm1(s2 / 2)), rel=1e-12
    )
    assert pooled.observables["t"] == pool(ms).observables["t"]  # not listed: inverse variance
    assert pool_log_normal(np.array([3.0]), np.array([0.6])) == pytest.approx((3.0, 0.6))
    exact = [reading(2.0, 0.0), reading(2.0, 0.0)]
    assert pool(exact, log_normal=("d",))["d"] == 2.0  # zero error bars: the plain mean
    zero = [reading(0.0, 0.1), reading(1.0, 0.1)]
    assert pool(zero, log_normal=("d",))["d"] == pytest.approx(0.5)


def test_repeating_the_best_experiment_does_not_harvest_noise() -> None:
    """Twelve repeats of one reactor run: the score of the k-th repeat is the pooled yield,
    whose spread shrinks as 1/sqrt(k), so the campaign's best score tends to the true
    yield instead of the maximum of twelve noisy draws."""
    task = labtwin.load_task("BatchReactor-v1", budget=12)
    truth = labtwin.load_task("BatchReactor-v1", noise=0.0)
    n = 24
    batch = labtwin.CampaignBatch(task, n)
    campaigns = batch.reset(range(n), range(n))
    steps = [batch.step(range(n), [GOOD] * n) for _ in range(12)]  # one simulator call each
    best = [c.best_score for c in campaigns]
    yields = np.array([[r.measurement["yield_B"] for r in step] for step in steps])  # (12, n)
    maxima = yields.max(axis=0)
    true_yields = [truth.measure([GOOD], conditions=c.conditions)[0]["yield_B"] for c in campaigns]
    # the last score is the pooled yield of all 12 (equal uncertainties up to 2 % noise)
    np.testing.assert_allclose([r.score for r in steps[-1]], yields.mean(axis=0), atol=3e-3)
    harvested = np.mean(np.array(maxima) - true_yields)
    kept = np.mean(np.array(best) - true_yields)
    sigma = 0.02 * np.mean(true_yields) + 0.002 / GOOD["feed_conc_mol_L"]
    assert harvested > 1.2 * sigma  # the max of 12 draws is ~1.6 sigma high
    assert kept < 0.8 * sigma  # pooled best: only the first draws' excess survives


def test_scores_stay_in_the_documented_range() -> None:
    task = labtwin.load_task("BatchReactor-v1")
    high = Measurement("ok", {name: Value(1.3, "") for name in ("yield_B",)})
    assert task.score(high, {}) == 1.0
    assert task.score(Measurement("ok", {"yield_B": Value(-0.1, "")}), {}) == 0.0


def test_a_campaign_ends_with_a_fresh_reading_of_its_best_experiment(tmp_path) -> None:
    """The closing confirmation: when a reactor campaign spends its budget, the lab measures
    the best-scoring experiment once more with the campaign's next seed, scores it alone,
    and the last reward takes back what the best reading had above it. The record round-trips
    through a run, replays, and decides success."""
    from labtwin.campaign import recommended, replay
    from labtwin.runs import RunStore, load

    task = labtwin.load_task("BatchReactor-v1", budget=3)
    runs = [GOOD, {**GOOD, "temperature_K": 350.0}, {**GOOD, "time_min": 5.0}]
    with RunStore(tmp_path / "run", {"kind": "test"}) as store:
        batch = labtwin.CampaignBatch(task, 8, recorder=store)
        campaigns = batch.reset(range(8), range(8))
        for proposal in runs:
            records = batch.step(range(8), [proposal] * 8)
    for c, last in zip(campaigns, records):
        assert c.done and [r.confirmation is None for r in c.history] == [True, True, False]
        best = recommended(c.history)
        assert last.confirmation.experiment == best.measurement.experiment
        # the campaign's next seed, drawn after the last step's
        rng = labtwin.campaign.campaign_rng(c.seed)
        task.sample_conditions(rng)
        seeds = [int(rng.integers(0, 2**63 - 1)) for _ in range(4)]
        (again,) = task.run([best.measurement.experiment], [c.conditions], [seeds[3]])
        assert again == last.confirmation
        assert last.confirmed_score == task.score(again, c.conditions)  # alone, not pooled
        assert c.result_score == min(c.best_score, last.confirmed_score)
        assert sum(r.reward for r in c.history) == pytest.approx(c.result_score, abs=1e-12)
        ok = c.best_score >= task.success_threshold
        assert task.success(c.history, c.conditions) == (ok and c.confirmed_score >= 0.85)
        assert replay(task, c.seed, c.history) == c.history
    # some best readings were lucky: their confirmation reads lower
    assert any(c.confirmed_score < c.best_score for c in campaigns)
    run = load(tmp_path / "run")
    last = [r for r in run.records if r.confirmation is not None]
    assert [r.to_dict(artifacts=False) for r in last] == [
        r.to_dict(artifacts=False) for r in records
    ]


def test_labs_that_end_with_an_answer_or_retry_a_search_do_not_confirm() -> None:
    assert labtwin.load_task("BatchReactor-v1").confirms_best
    assert not labtwin.load_task("ArrheniusFit-v1").confirms_best  # answers end it
    assert not labtwin.load_task("LJClusterAnneal-v0").confirms_best  # a repeat is a new try
    task = labtwin.load_task("ArrheniusFit-v1", budget=1)
    batch = labtwin.CampaignBatch(task, 1)
    batch.reset([0], [0])
    (record,) = batch.step([0], [{"temperature_K": 330.0, "time_min": 30.0}])
    assert batch.campaigns[0].done and record.confirmation is None
