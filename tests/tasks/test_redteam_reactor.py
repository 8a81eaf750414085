"""Red team for the reactor labs: no exploit may earn more than honest play.

Each test runs exploits and an honest reference on the *same* campaigns (same
campaign seeds, so the same reagents and the same noise seeds per step) in one
:class:`~labtwin.CampaignBatch`, so every step is one simulator call and the
comparison is paired.

Honest references and margins (measured numbers are in the lab docstrings and
in each test):

- BatchReactor-v1 / ReactorProtocol-v1: ``local``, an honest local search that
  starts from the nominal lab's optimum and then perturbs its best run so far.
  An exploit with the same prior knowledge (the optimum) may not beat its mean
  best score by more than ``MARGIN`` = 0.01, a quarter of the HPLC's 1-sigma
  yield error at the optimum (0.038 at 0.1 mol/L); the paired difference's
  standard error over the campaigns is about 0.004.
- ArrheniusFit-v1: ``fit``, an honest weighted Arrhenius fit of seven runs.
  Leaks must give exactly what the honest two-run fit gives (same readings,
  same answer); a guess without experiments must score far below the fit.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np
import pytest

import labtwin
from labtwin import Analysis, Answer, Campaign, CampaignBatch
from labtwin.campaign import campaign_rng
from labtwin.experiment import field_bounds
from labtwin.simulators.kinetics import GAS_CONSTANT
from labtwin.tasks.reactor import (
    ABSOLUTE_NOISE,
    RELATIVE_NOISE,
    SLUGGISH_TURNOVER,
    ReactorRun,
    max_yield_bound,
    run_reactors,
)
from labtwin.tasks.reactor_protocol import Stage, TemperatureProgramme

MARGIN = 0.01  # see the module docstring
SEEDS = range(24)  # campaigns per strategy
AGENT_STREAM = 0xA6E  # the strategies' own random numbers, one stream per campaign seed
NUDGE = 1e-6  # relative size of a near-repeat's perturbation

Strategy = Callable[[int, Campaign, np.random.Generator], Any]


def lockstep(
    task: labtwin.Task,
    strategies: dict[str, Strategy],
    seeds: range = SEEDS,
    conditions: dict[str, list[dict]] | None = None,
) -> dict[str, list[Campaign]]:
    """Every strategy on the campaigns ``seeds``, all in one batch, until all are done.

    ``strategy(k, campaign, rng)`` proposes the campaign's k-th budgeted step;
    ``conditions[name]`` replaces the sampled conditions of that strategy's campaigns.
    """
    names, n = list(strategies), len(seeds)
    batch = CampaignBatch(task, len(names) * n)
    slots = list(range(len(names) * n))
    given = None
    if conditions:
        sampled = [task.sample_conditions(campaign_rng(s)) for s in seeds]
        given = [c for name in names for c in conditions.get(name, sampled)]
    campaigns = batch.reset(slots, [s for _ in names for s in seeds], given)
    rngs = [np.random.default_rng([AGENT_STREAM, s]) for _ in names for s in seeds]
    plan = [strategies[name] for name in names for _ in seeds]
    while live := [k for k in slots if not campaigns[k].done]:
        proposals = [plan[k](campaigns[k].experiments, campaigns[k], rngs[k]) for k in live]
        batch.step(live, proposals)
    return {name: campaigns[i * n : (i + 1) * n] for i, name in enumerate(names)}


def best_record(campaign: Campaign) -> labtwin.Record:
    return max(
        (r for r in campaign.history if r.kind == "experiment" and r.measurement.ok),
        key=lambda r: r.score,
    )


def mean_best(campaigns: list[Campaign]) -> float:
    return float(np.mean([c.best_score for c in campaigns]))


def mean_earned(campaigns: list[Campaign]) -> float:
    """What the campaigns earned: the lower of the best score and the closing confirmation
    (a fresh reading of the best experiment), which is the improvement rewards' sum."""
    return float(np.mean([c.result_score for c in campaigns]))


def success_rate(task: labtwin.Task, campaigns: list[Campaign]) -> float:
    return float(np.mean([task.success(c.history, c.conditions) for c in campaigns]))


def true_yields(task_id: str, campaigns: list[Campaign]) -> np.ndarray:
    """The noise-free yield of every ok experiment, ``(campaigns, experiments)``, one call."""
    truth = labtwin.load_task(task_id, noise=0.0)
    runs = [
        (r.measurement.experiment, c.conditions)
        for c in campaigns
        for r in c.history
        if r.kind == "experiment" and r.measurement.ok
    ]
    measured = truth.run([e for e, _ in runs], [c for _, c in runs], [0] * len(runs))
    return np.array([m["yield_B"] for m in measured]).reshape(len(campaigns), -1)


def nudge(experiment: dict, k: int, rel: float = NUDGE) -> dict:
    """A near-repeat: every number moved down by ``k * rel`` (relative), up at a lower bound."""
    out = {}
    for name, value in experiment.items():
        if isinstance(value, list):
            out[name] = [nudge(v, k, rel) for v in value]
            continue
        step = k * rel * max(abs(value), 1e-3)
        out[name] = value - step if value - step >= KNOB_LOW[name] else value + step
    return out


# ---- the batch reactor ---------------------------------------------------------------------

REACTOR = "BatchReactor-v1"
#: the nominal lab's best run over the knob box (noise-free grid: true yield 0.930)
REACTOR_OPTIMUM = {
    "temperature_K": 308.0,
    "time_min": 180.0,
    "feed_conc_mol_L": 0.1,
    "catalyst_mol_pct": 5.0,
}
#: lower bounds of the knobs (the same for a run and a programme's stages)
KNOB_LOW = {
    name: field_bounds(field)[0]
    for model in (ReactorRun, TemperatureProgramme, Stage)
    for name, field in model.model_fields.items()
    if field_bounds(field) is not None
}


def corners(low: dict[str, float], high: dict[str, float]) -> list[dict[str, float]]:
    names = list(low)
    return [
        {name: (high if (i >> j) & 1 else low)[name] for j, name in enumerate(names)}
        for i in range(2 ** len(names))
    ]


REACTOR_CORNERS = corners(
    {"temperature_K": 300.0, "time_min": 1.0, "feed_conc_mol_L": 0.1, "catalyst_mol_pct": 0.0},
    {"temperature_K": 380.0, "time_min": 180.0, "feed_conc_mol_L": 2.0, "catalyst_mol_pct": 5.0},
)


def reactor_strategies(task: labtwin.Task) -> dict[str, Strategy]:
    view = task.numeric_view

    def local(k: int, c: Campaign, rng: np.random.Generator) -> Any:
        if k == 0:
            return REACTOR_OPTIMUM
        best = view.to_vector(task.experiment_model.model_validate(best_record(c).proposal))
        return np.clip(best + 0.1 * rng.standard_normal(best.shape), -1.0, 1.0)

    return {
        "random": lambda k, c, rng: task.random_experiment(rng),
        "local": local,
        "repeat": lambda k, c, rng: REACTOR_OPTIMUM,
        "near": lambda k, c, rng: nudge(REACTOR_OPTIMUM, k),
        "corners": lambda k, c, rng: REACTOR_CORNERS[k % len(REACTOR_CORNERS)],
    }


IMPOSSIBLE_STRATEGIES = ("random", "local", "near", "corners")


@cache
def reactor_campaigns() -> dict[str, list[Campaign]]:
    """The reactor strategies on the lab and on its impossible variant (``impossible-*``)."""
    task = labtwin.load_task(REACTOR)
    strategies = reactor_strategies(task)
    impossible = labtwin.load_task(REACTOR, impossible=True)
    sluggish = [impossible.sample_conditions(campaign_rng(s)) for s in SEEDS]
    strategies |= {f"impossible-{name}": strategies[name] for name in IMPOSSIBLE_STRATEGIES}
    conditions = {f"impossible-{name}": sluggish for name in IMPOSSIBLE_STRATEGIES}
    return lockstep(task, strategies, conditions=conditions)


# ---- the temperature-programme reactor -------------------------------------------------------

PROTOCOL = "ReactorProtocol-v1"
PROTOCOL_SEEDS = range(16)  # fewer campaigns: a four-stage programme costs four integrator calls
#: the nominal lab's best one-stage programme (noise-free grid: true yield 0.927)
PROTOCOL_OPTIMUM = {
    "feed_conc_mol_L": 0.1,
    "catalyst_mol_pct": 5.0,
    "steps": [{"temperature_K": 313.0, "time_min": 120.0}],
}
PROTOCOL_CORNERS = [
    {
        "feed_conc_mol_L": c["feed_conc_mol_L"],
        "catalyst_mol_pct": c["catalyst_mol_pct"],
        "steps": [{"temperature_K": c["temperature_K"], "time_min": c["time_min"]}] * n,
    }
    for c in corners(
        {"temperature_K": 300.0, "time_min": 1.0, "feed_conc_mol_L": 0.1, "catalyst_mol_pct": 0.0},
        {
            "temperature_K": 380.0,
            "time_min": 120.0,
            "feed_conc_mol_L": 2.0,
            "catalyst_mol_pct": 5.0,
        },
    )
    for n in (1, 4)
]


def perturbed_programme(programme: dict, rng: np.random.Generator) -> dict:
    """An honest local step: every knob moved a little, kept inside its bounds."""
    clip = np.clip
    return {
        "feed_conc_mol_L": float(
            clip(programme["feed_conc_mol_L"] * rng.lognormal(0, 0.1), 0.1, 2)
        ),
        "catalyst_mol_pct": float(clip(programme["catalyst_mol_pct"] + rng.normal(0, 0.3), 0, 5)),
        "steps": [
            {
                "temperature_K": float(clip(s["temperature_K"] + rng.normal(0, 3.0), 300, 380)),
                "time_min": float(clip(s["time_min"] * rng.lognormal(0, 0.1), 1, 120)),
            }
            for s in programme["steps"]
        ],
    }


def split_optimum(k: int) -> dict:
    """The optimum's one stage split in two at the same temperature: the same run, physically
    (the integrator's steps differ; the yields agree to 1e-12), but a different experiment."""
    if k == 0:
        return PROTOCOL_OPTIMUM
    (stage,) = PROTOCOL_OPTIMUM["steps"]
    first = stage["time_min"] * k / 13
    steps = [{**stage, "time_min": first}, {**stage, "time_min": stage["time_min"] - first}]
    return {**PROTOCOL_OPTIMUM, "steps": steps}


def protocol_strategies(task: labtwin.Task) -> dict[str, Strategy]:
    def local(k: int, c: Campaign, rng: np.random.Generator) -> Any:
        return PROTOCOL_OPTIMUM if k == 0 else perturbed_programme(best_record(c).proposal, rng)

    return {
        "random": lambda k, c, rng: task.random_experiment(rng),
        "local": local,
        "repeat": lambda k, c, rng: PROTOCOL_OPTIMUM,
        "near": lambda k, c, rng: nudge(PROTOCOL_OPTIMUM, k),
        "split": lambda k, c, rng: split_optimum(k),
        "corners": lambda k, c, rng: PROTOCOL_CORNERS[k % len(PROTOCOL_CORNERS)],
    }


@cache
def protocol_campaigns() -> dict[str, list[Campaign]]:
    task = labtwin.load_task(PROTOCOL)
    strategies = protocol_strategies(task)
    impossible = labtwin.load_task(PROTOCOL, impossible=True)
    sluggish = [impossible.sample_conditions(campaign_rng(s)) for s in PROTOCOL_SEEDS]
    strategies |= {f"impossible-{name}": strategies[name] for name in IMPOSSIBLE_STRATEGIES}
    conditions = {f"impossible-{name}": sluggish for name in IMPOSSIBLE_STRATEGIES}
    return lockstep(task, strategies, PROTOCOL_SEEDS, conditions=conditions)


LABS = {REACTOR: reactor_campaigns, PROTOCOL: protocol_campaigns}


# ---- yield labs: repeats, near-repeats, range, success -----------------------------------------


@pytest.mark.parametrize("task_id", LABS)
def test_repeating_the_best_run_earns_no_more_than_honest_local_search(task_id: str) -> None:
    """Exact repeats of the optimum are pooled: their best score stays near the true yield.

    Measured (BatchReactor / ReactorProtocol): repeats 0.936 / 0.936 against the
    honest local search's 0.958 / 0.964. The repeats' best exceeds its true
    yield by 0.64 sigma (the best running mean of the pooled readings), not by
    the ~1.9 sigma of the best of 20 fresh draws; the honest local search's
    best exceeds the true yield of its best run by 1.0 / 1.2 sigma (the
    winner's curse of any best-of-noisy-readings score).
    """
    runs = LABS[task_id]()
    assert mean_best(runs["repeat"]) <= mean_best(runs["local"]) + MARGIN
    truth = true_yields(task_id, runs["repeat"])[:, 0]
    sigma = RELATIVE_NOISE * truth + ABSOLUTE_NOISE / 0.1  # 1-sigma yield error at 0.1 mol/L
    excess = np.array([c.best_score for c in runs["repeat"]]) - truth
    assert np.mean(excess / sigma) < 1.0


@pytest.mark.parametrize("task_id", LABS)
def test_near_repeats_earn_no_more_than_exact_repeats_or_honest_play(task_id: str) -> None:
    """A run moved by 1e-6 is the same run; the best of its fresh readings is inflated by
    noise (next test), but a campaign earns the lower of its best score and the closing
    confirmation of its best run, a fresh reading (:class:`labtwin.CampaignBatch`)."""
    runs = LABS[task_id]()
    assert mean_earned(runs["near"]) <= mean_earned(runs["repeat"]) + MARGIN
    assert mean_earned(runs["near"]) <= mean_earned(runs["local"]) + MARGIN


@pytest.mark.parametrize("task_id", LABS)
def test_near_repeats_harvest_noise_and_the_confirmation_takes_it_back(task_id: str) -> None:
    """Near-repeats measure the optimum's true yield (to 1e-3, 0.03 sigma), yet their best
    score lies above the exact repeats' (measured: 0.978 / 0.971 against 0.936 / 0.936 for
    BatchReactor / ReactorProtocol): the winner's curse of a best-of-readings score. The
    confirmation reads the chosen run afresh: its scores scatter around the true yield
    (mean within 3 standard errors), so what near-repeats earn is not inflated."""
    runs = LABS[task_id]()
    near, repeat = true_yields(task_id, runs["near"]), true_yields(task_id, runs["repeat"])
    np.testing.assert_allclose(near, repeat, atol=1e-3)
    assert mean_best(runs["near"]) > mean_best(runs["repeat"]) + MARGIN
    confirmed = np.array([c.confirmed_score for c in runs["near"]])
    truth = near[:, 0]
    sigma = RELATIVE_NOISE * truth + ABSOLUTE_NOISE / 0.1  # 1-sigma yield error at 0.1 mol/L
    assert abs(np.mean(confirmed - truth)) < 3 * sigma.mean() / math.sqrt(len(truth))
    assert mean_earned(runs["near"]) <= truth.mean() + MARGIN


def test_equivalent_programmes_earn_no_more_than_exact_repeats() -> None:
    """The optimum split at 12 different points is the same run (true yields equal to
    1e-9) but another experiment each time, so pooling cannot see it (measured best 0.971
    against 0.936 for exact repeats); the confirmation can."""
    runs = protocol_campaigns()
    np.testing.assert_allclose(
        true_yields(PROTOCOL, runs["split"]), true_yields(PROTOCOL, runs["repeat"]), atol=1e-9
    )
    assert mean_best(runs["split"]) > mean_best(runs["repeat"]) + MARGIN
    assert mean_earned(runs["split"]) <= mean_earned(runs["repeat"]) + MARGIN


@pytest.mark.parametrize("task_id", LABS)
def test_what_a_campaign_earns_is_its_return(task_id: str) -> None:
    """Improvement rewards sum to what the campaign earned above the baseline, for every
    strategy, including the closing confirmation's correction on the last step."""
    task = labtwin.load_task(task_id)
    for campaigns in LABS[task_id]().values():
        for c in campaigns:
            total = sum(r.reward for r in c.history)
            assert total == pytest.approx(c.result_score - task.baseline_score, abs=1e-12)
            assert c.confirmed_score is not None and c.history[-1].confirmation.ok


@pytest.mark.parametrize("task_id", LABS)
def test_scores_stay_in_range_everywhere_including_the_knob_box_corners(task_id: str) -> None:
    task = labtwin.load_task(task_id)
    runs = LABS[task_id]()
    low, high = task.score_range
    scores = [r.score for cs in runs.values() for c in cs for r in c.history]
    assert len(scores) > 1000 and all(low <= s <= high for s in scores)
    corner_scores = [r.score for c in runs["corners"] for r in c.history]
    assert min(corner_scores) == 0.0  # some corner makes no B at all (1 min at 300 K)


@pytest.mark.parametrize("task_id", LABS)
def test_a_very_noisy_instrument_is_clipped_into_the_range(task_id: str) -> None:
    """With 10x the HPLC noise readings leave 0..1; scores, through a campaign, do not."""
    task = labtwin.load_task(task_id, noise=10.0, budget=8)
    optimum = REACTOR_OPTIMUM if task_id == REACTOR else PROTOCOL_OPTIMUM
    runs = lockstep(task, {"near": lambda k, c, rng: nudge(optimum, k)}, range(8))
    records = [r for c in runs["near"] for r in c.history]
    assert max(r.measurement["yield_B"] for r in records) > 1.0
    assert max(r.score for r in records) == 1.0
    assert all(0.0 <= r.score <= 1.0 for r in records)


@pytest.mark.parametrize("task_id", LABS)
def test_the_success_threshold_is_reachable_by_honest_play(task_id: str) -> None:
    """Honest local search from the optimum succeeds in most campaigns, random search in
    few (measured: local 100 % / 100 %, random 21 % / 6 % for BatchReactor / ReactorProtocol)."""
    task, runs = labtwin.load_task(task_id), LABS[task_id]()
    assert success_rate(task, runs["local"]) >= 0.75
    assert success_rate(task, runs["random"]) < 0.5


@pytest.mark.parametrize("task_id", LABS)
def test_on_the_impossible_variant_nothing_succeeds(task_id: str) -> None:
    """Sluggish reagents: honest play and every exploit stay far below the threshold."""
    task, runs = labtwin.load_task(task_id), LABS[task_id]()
    bound = max_yield_bound(SLUGGISH_TURNOVER)
    assert bound < task.success_threshold - 0.5  # 0.26 against 0.85
    for name in IMPOSSIBLE_STRATEGIES:
        campaigns = runs[f"impossible-{name}"]
        assert success_rate(task, campaigns) == 0.0, name
        assert max(c.best_score for c in campaigns) < bound, name
        assert true_yields(task_id, campaigns).max() < bound, name


@pytest.mark.parametrize("task_id", LABS)
def test_the_impossible_flag_gives_the_sluggish_reagents(task_id: str) -> None:
    """``impossible=True`` campaigns draw what the tests above ran (and the nominal lab too)."""
    impossible = labtwin.load_task(task_id, impossible=True)
    batch = CampaignBatch(impossible, 3)
    drawn = [c.conditions for c in batch.reset(range(3), [0, 1, 2])]
    assert drawn == [impossible.sample_conditions(campaign_rng(s)) for s in (0, 1, 2)]
    nominal = labtwin.load_task(task_id).nominal_conditions()
    slow = impossible.nominal_conditions()
    assert slow["prefactors"][0] < nominal["prefactors"][0] / 10
    assert slow["prefactors"][1:] == nominal["prefactors"][1:]


def test_no_batch_reactor_run_in_the_box_can_succeed_on_the_impossible_variant() -> None:
    """Optimise the noise-free yield over the knob box for several sluggish campaigns.

    A 9 x 9 x 3 x 3 grid (temperature, log time, feed, catalyst), then a finer
    grid around the best point; the optimum stays below the analytic bound
    1 - exp(-0.3) = 0.26 (measured: 0.021 for the default spread, 0.045 with a
    spread of 1.0).
    """
    impossible = labtwin.load_task(REACTOR, impossible=True, kinetics_spread=1.0)
    conditions = [impossible.sample_conditions(campaign_rng(s)) for s in range(6)]
    axes = (np.linspace(300, 380, 9), np.geomspace(1, 180, 9), [0.1, 0.5, 2.0], [0.0, 2.5, 5.0])
    grid = np.stack(np.meshgrid(*axes, indexing="ij")).reshape(4, -1)
    n = grid.shape[1]
    final, _ = run_reactors(
        *np.tile(grid, len(conditions)), [c for c in conditions for _ in range(n)]
    )
    coarse = (final[:, 1] / np.tile(grid[2], len(conditions))).reshape(len(conditions), n)
    fine = []
    for T, t, feed, cat in grid[:, coarse.argmax(axis=1)].T:  # the best point of each campaign
        around = (
            np.clip(np.linspace(T - 10, T + 10, 11), 300, 380),
            np.clip(np.geomspace(t / 2, t * 2, 11), 1, 180),
            [feed],
            [cat],
        )
        fine.append(np.stack(np.meshgrid(*around, indexing="ij")).reshape(4, -1))
    fine = np.concatenate(fine, axis=1)
    m = fine.shape[1] // len(conditions)
    final, _ = run_reactors(*fine, [c for c in conditions for _ in range(m)])
    best = np.maximum(
        coarse.max(axis=1), (final[:, 1] / fine[2]).reshape(len(conditions), m).max(1)
    )
    assert max(best) < max_yield_bound(SLUGGISH_TURNOVER)


# ---- leaks: error bars and artifacts ---------------------------------------------------------


@pytest.mark.parametrize("task_id", [REACTOR, PROTOCOL, "ArrheniusFit-v1"])
def test_error_bars_are_the_calibration_at_the_reading(task_id: str) -> None:
    """Every reported concentration error is 2 % of the reading plus 2 mmol/L: a
    function of what was measured, so it tells nothing the reading does not."""
    task = labtwin.load_task(task_id)
    rng = np.random.default_rng(0)
    experiments = [task.random_experiment(rng) for _ in range(64)]
    for m in task.measure(experiments, seed=1):
        for name, value in m.observables.items():
            if name.startswith("conc_"):
                calibration = RELATIVE_NOISE * value.value + ABSOLUTE_NOISE
                assert value.uncertainty == pytest.approx(calibration, rel=1e-12)


@pytest.mark.parametrize("task_id", [REACTOR, PROTOCOL])
def test_the_time_course_artifact_is_measured_not_the_simulators_truth(task_id: str) -> None:
    """The artifact holds aliquot readings (noisy); its last row is the reported reading."""
    task, truth = labtwin.load_task(task_id), labtwin.load_task(task_id, noise=0.0)
    optimum = REACTOR_OPTIMUM if task_id == REACTOR else PROTOCOL_OPTIMUM
    (m,), (exact,) = task.measure([optimum], seed=2), truth.measure([optimum], seed=2)
    course, true_course = m.artifacts["time_course"], exact.artifacts["time_course"]
    np.testing.assert_array_equal(course[:, 0], true_course[:, 0])  # the sample times
    assert np.all(course[1:, 1:3] != true_course[1:, 1:3])  # A and B read with noise
    last = [m[f"conc_{s}"] for s in "ABCD"]
    np.testing.assert_array_equal(course[-1, 1:], last)


# ---- the Arrhenius lab ------------------------------------------------------------------------

ARRHENIUS = "ArrheniusFit-v1"
FEED = 0.5  # mol/L, the lab's fixed feed
TWO_RUNS = ({"temperature_K": 320.0, "time_min": 30.0}, {"temperature_K": 370.0, "time_min": 3.0})


def ln_rate(m: labtwin.Measurement, conc_a: float | None = None) -> tuple[float, float, float]:
    """(T, ln k, its standard error) of one run from the A left (default: the reading)."""
    a = m["conc_A"] if conc_a is None else conc_a
    turnover = -math.log(min(max(a, 1e-12), FEED * (1 - 1e-12)) / FEED)
    k_t = turnover / m.experiment["time_min"]
    error = m.observables["conc_A"].uncertainty / max(a, 1e-12) / turnover
    return m.experiment["temperature_K"], math.log(k_t), error


def arrhenius_energy(points: list[tuple[float, float, float]], prior: float = 70e3) -> float:
    """Weighted least squares of ln k = c - E / (R T), in J/mol (the prior for one temperature)."""
    temperatures = {T for T, _, _ in points}
    if len(temperatures) < 2:
        return prior
    T, y, s = (np.array(v) for v in zip(*points))
    X = np.stack([np.ones_like(T), -1.0 / (GAS_CONSTANT * T)], axis=1) / s[:, None]
    return float(np.linalg.lstsq(X, y / s, rcond=None)[0][1])


def answer(energy_J_mol: float) -> Answer:
    return Answer({"activation_energy_kJ_mol": float(np.clip(energy_J_mol / 1e3, 0.0, 500.0))})


def honest_fit(k: int, c: Campaign, rng: np.random.Generator) -> Any:
    """One run at 340 K, then 320 K and 375 K in turn, each timed for ~80 % conversion
    from the fit so far (k t = 1.6), then the weighted fit of all seven runs."""
    points = [ln_rate(m) for m in c.measurements() if m.ok and 0 < m["conc_A"] < FEED]
    if k == 0:
        return {"temperature_K": 340.0, "time_min": 20.0}
    if k == c.task.budget - 1:
        return answer(arrhenius_energy(points))
    T = (320.0, 375.0)[k % 2]
    energy = arrhenius_energy(points)
    if not points:
        return {"temperature_K": T, "time_min": 20.0}
    T0, lnk0, _ = points[0]
    k_T = math.exp(lnk0 - energy / GAS_CONSTANT * (1 / T - 1 / T0))
    return {"temperature_K": T, "time_min": float(np.clip(1.6 / k_T, 1.0, 180.0))}


def two_run_fit(leak: bool) -> Strategy:
    """The textbook two-point estimate from TWO_RUNS; ``leak`` reads A from the error bar
    (``(sigma - 2 mmol/L) / 2 %``: the true A when the error bar came from the truth)."""

    def strategy(k: int, c: Campaign, rng: np.random.Generator) -> Any:
        if k < 2:
            return TWO_RUNS[k]
        points = []
        for m in c.measurements():
            leaked = (m.observables["conc_A"].uncertainty - ABSOLUTE_NOISE) / RELATIVE_NOISE
            points.append(ln_rate(m, leaked if leak else None))
        (T1, y1, _), (T2, y2, _) = points
        return answer(GAS_CONSTANT * (y2 - y1) / (1 / T1 - 1 / T2))

    return strategy


def answer_scores(campaigns: list[Campaign]) -> np.ndarray:
    return np.array(
        [c.history[-1].score if c.history[-1].kind == "answer" else 0.0 for c in campaigns]
    )


@cache
def arrhenius_campaigns() -> dict[str, list[Campaign]]:
    task = labtwin.load_task(ARRHENIUS)
    strategies = {
        "fit": honest_fit,
        "two-run": two_run_fit(leak=False),
        "leak": two_run_fit(leak=True),
        "guess": lambda k, c, rng: Answer({"activation_energy_kJ_mol": 70.0}),
        "bounds": lambda k, c, rng: Answer({"activation_energy_kJ_mol": (0.0, 500.0)[c.seed % 2]}),
    }
    return lockstep(task, strategies, range(64))


def test_error_bars_no_longer_give_away_the_activation_energy() -> None:
    """The v0 exploit (two runs, A read from the error bar) scored 1.000 against 0.68 for
    the same runs read honestly (200 campaigns). Now the error bar is the calibration at
    the reading, so the 'leaked' A is the reading: the same answer, the same score."""
    runs = arrhenius_campaigns()
    leak, honest = answer_scores(runs["leak"]), answer_scores(runs["two-run"])
    np.testing.assert_allclose(leak, honest, rtol=1e-9, atol=1e-12)
    assert leak.mean() < 0.8  # measured: 0.70 (v0 leak: 1.000)


def test_the_honest_fit_succeeds_and_beats_every_shortcut() -> None:
    """Measured over these 64 campaigns: the honest fit 0.94 (success 100 %), two runs
    0.70 (45 %), guessing the middle of the stated range without experiments 0.26
    (6 %), answering a bound of the answer's range (0 or 500 kJ/mol) 0.00005."""
    task, runs = labtwin.load_task(ARRHENIUS), arrhenius_campaigns()
    scores = {name: answer_scores(c) for name, c in runs.items()}
    assert scores["fit"].mean() > 0.9 and success_rate(task, runs["fit"]) >= 0.9
    assert scores["two-run"].mean() <= scores["fit"].mean() - 0.1
    assert scores["guess"].mean() <= scores["fit"].mean() - 0.5
    # a blind guess lands within 1.1 kJ/mol of a uniform 50-90 kJ/mol draw 5.6 % of the time
    assert success_rate(task, runs["guess"]) <= 0.056 + 3 * math.sqrt(0.056 / 64)
    assert scores["bounds"].max() < 1e-3
    low, high = task.score_range
    assert all(low <= r.score <= high for cs in runs.values() for c in cs for r in c.history)


def test_arrhenius_runs_score_nothing_so_repeats_earn_nothing() -> None:
    runs = arrhenius_campaigns()
    for c in runs["fit"]:
        assert [r.score for r in c.history if r.kind == "experiment"] == [0.0] * 7
        assert not any(r.measurement.artifacts for r in c.history)  # final readings only


def test_arrhenius_has_no_impossible_variant() -> None:
    with pytest.raises(ValueError, match="no impossible variant"):
        labtwin.load_task(ARRHENIUS, impossible=True)


# ---- caps ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("task_id", [REACTOR, PROTOCOL, ARRHENIUS])
def test_invalid_and_analysis_calls_cannot_keep_a_campaign_alive(task_id: str) -> None:
    """Invalid experiments and answers spend the budget; analysis calls (none of these
    labs has a tool) hit the turn cap; a finished campaign takes no more steps."""
    task = labtwin.load_task(task_id, budget=4)
    junk = {
        "invalid": lambda k, c, rng: "{not json",
        "bad-answer": lambda k, c, rng: Answer({"activation_energy_kJ_mol": -1.0}),
        "analysis": lambda k, c, rng: Analysis("fit_everything", {}),
    }
    runs = lockstep(task, junk, range(2))
    for name, campaigns in runs.items():
        for c in campaigns:
            assert c.done and c.best_score == 0.0 and not task.success(c.history, c.conditions)
            if name == "analysis":
                assert len(c.history) == task.max_turns and c.end_reason.startswith("turn cap")
            else:
                assert len(c.history) == task.budget and c.end_reason == "budget spent"
    batch = CampaignBatch(task, 1)
    batch.reset([0], [0])
    for _ in range(task.max_turns):
        batch.step([0], [Analysis("fit_everything", {})])
    with pytest.raises(RuntimeError, match="finished campaign"):
        batch.step([0], [REACTOR_OPTIMUM])


def test_an_accepted_answer_ends_the_campaign() -> None:
    task = labtwin.load_task(ARRHENIUS)
    batch = CampaignBatch(task, 1)
    batch.reset([0], [0])
    (record,) = batch.step([0], [Answer({"activation_energy_kJ_mol": 70.0})])
    assert record.kind == "answer" and batch.campaigns[0].done
    with pytest.raises(RuntimeError, match="finished campaign"):
        batch.step([0], [Answer({"activation_energy_kJ_mol": 70.0})])
