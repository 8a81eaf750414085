"""Red team of the molecular-dynamics labs' rewards: an exploit must earn no more than honest play.

Each test names its honest reference: a scripted honest strategy (defined here; the slow
tests measure it and assert the reference numbers the fast tests compare against) or a
baseline, with a margin. Exploits tried, per lab:

- repeats of one experiment: the core scores a repeat from all its measurements pooled
  (:func:`labtwin.campaign.score_of`), so repeating cannot harvest noise; near-repeats,
  which dodge that rule, must not beat pooling either;
- answers without experiments (LJ EOS: the published JZG equation of state applied to the
  stated isotherm and target pressure);
- the corners of the knob box: measurements ``ok`` or ``failed`` (a blow-up is never
  rewarded), scores inside the lab's ``score_range``;
- the ``impossible=True`` variant, whose target the physics cannot reach: there neither the
  exploits nor honest play may succeed.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import labtwin
from labtwin.campaign import CampaignBatch, score_of
from labtwin.measurement import pool
from labtwin.runner import run_campaigns
from labtwin.simulators.md.build import CLUSTER_GLOBAL_MINIMA
from labtwin.tasks import md_cluster, md_eos, md_water
from labtwin.tasks.md_eos import jzg_density_at_pressure, scaled_jzg_density, scaled_jzg_pressure

MD_LABS = ("LJEquationOfState-v2", "WaterDensity-v2", "LJClusterAnneal-v0", "LJ38ClusterAnneal-v0")

# ---- honest references (asserted by the slow tests below, where they are measured) ----------
#: scripted honest EOS strategy (:func:`honest_eos`) over 16 campaigns: mean answer score
#: measured 0.89, success rate 10 / 16, mean best run 0.76
HONEST_EOS_ANSWER = 0.85
HONEST_EOS_SUCCESS = 0.5
HONEST_EOS_BEST_RUN = 0.65
#: scripted honest water strategy (:func:`honest_water_plan`, 3 pooled repeats) over 8
#: campaigns: what it earns (the lower of its best score and the closing confirmation),
#: measured 0.53 (campaigns 0.12-0.86, sd 0.22: 0.08 on the mean of 8; on another machine,
#: whose OpenMM sums differ, 0.63 over the first 4), so the bar is 2 sd under 0.53; the
#: target-blind centre strategy earns about tolerance * sqrt(2 pi) / range = 0.18 over the
#: lab's targets, and must stay below the honest one by HONEST_WATER_MARGIN
HONEST_WATER_EARNED = 0.35
HONEST_WATER_MARGIN = 0.15
#: random search on LJ13 (budget 10): measured 6 / 8 campaigns reach the global minimum
HONEST_LJ13_SUCCESS = 0.5
#: answer score above which a no-experiment EOS guess is called "as good as honest"
MARGIN = 0.1


def steps(task: labtwin.Task, proposals_per_step, seeds, **batch_kwargs):
    """Run campaigns seeded ``seeds``, one proposal list per step; returns the batch."""
    batch = CampaignBatch(task, len(seeds), **batch_kwargs)
    batch.reset(list(range(len(seeds))), list(seeds))
    for proposals in proposals_per_step:
        batch.step(list(range(len(seeds))), proposals(batch.campaigns))
    return batch


def best_score(campaign) -> float:
    return max(r.score for r in campaign.history if r.score is not None)


# ================================================================ LJ equation of state


def isotherm_root(points, target: float, around: float | None = None) -> float:
    """Density where a weighted polynomial fit of measured P*(rho*) reaches ``target``.

    Fits the points within 0.15 of ``around`` when they bracket the target, else all points;
    quadratic (linear with two distinct densities); roots outside the knob box are ignored,
    and without one the measured density whose pressure is nearest the target is returned.
    """
    rho, pressure, sigma = (np.array(v, dtype=float) for v in zip(*points))
    if around is not None:
        near = np.abs(rho - around) <= 0.15
        if (
            len(np.unique(rho[near])) >= 3
            and pressure[near].min() <= target <= pressure[near].max()
        ):
            rho, pressure, sigma = rho[near], pressure[near], sigma[near]
    degree = min(2, len(np.unique(rho)) - 1)
    fit = np.polynomial.Polynomial.fit(rho, pressure, degree, w=1 / sigma)
    nearest = float(rho[np.argmin(np.abs(pressure - target))])
    roots = [
        r.real
        for r in (fit - target).roots()
        if abs(r.imag) < 1e-9 and md_eos.DENSITY_RANGE[0] <= r.real <= md_eos.DENSITY_RANGE[1]
    ]
    if not roots:
        return nearest
    return float(min(roots, key=lambda r: abs(r - (around if around is not None else nearest))))


def honest_eos(task: md_eos.LJEquationOfState, seeds: list[int]) -> CampaignBatch:
    """A scripted honest EOS campaign, all campaigns in one batch (budget 12).

    Three runs along the isotherm (rho* 0.3, 0.6, 0.9), a fit, two runs either side of its
    root, three runs at refitted roots, the last root three times (its runs pool), and the
    final fit's root as the answer. It reads only the stated conditions and its measurements.
    """
    n = len(seeds)
    batch = CampaignBatch(task, n)
    batch.reset(list(range(n)), seeds)
    campaigns = batch.campaigns
    isotherm = [c.conditions["temperature"] for c in campaigns]
    target = [c.conditions["target_pressure"] for c in campaigns]
    points: list[list[tuple[float, float, float]]] = [[] for _ in range(n)]

    def run(densities: list[float], n_steps: int) -> None:
        low, high = md_eos.DENSITY_RANGE
        proposals = [
            {
                "temperature": t,
                "density": float(np.clip(round(d, 3), low, high)),
                "production_steps": n_steps,
            }
            for t, d in zip(isotherm, densities)
        ]
        for i, record in enumerate(batch.step(list(range(n)), proposals)):
            m = record.measurement
            if m.ok:
                points[i].append(
                    (m.experiment["density"], m["pressure"], m.observables["pressure"].uncertainty)
                )

    for density in (0.3, 0.6, 0.9):
        run([density] * n, 250)
    estimate = [isotherm_root(points[i], target[i]) for i in range(n)]
    run([e - 0.04 for e in estimate], 500)
    run([e + 0.04 for e in estimate], 500)
    for _ in range(3):
        estimate = [isotherm_root(points[i], target[i], estimate[i]) for i in range(n)]
        run(estimate, 1000)
    estimate = [round(isotherm_root(points[i], target[i], estimate[i]), 3) for i in range(n)]
    for _ in range(task.budget - 9):
        run(estimate, 1000)  # the same experiment: its runs pool
    answers = [isotherm_root(points[i], target[i], estimate[i]) for i in range(n)]
    batch.step(list(range(n)), [labtwin.Answer({"density": a}) for a in answers])
    return batch


def prior_best_density(conditions: dict, n_grid: int = 21) -> float:
    """The no-experiment answer that maximises the expected answer score, given what the brief
    says: the well depth is within WELL_DEPTH_RANGE and the EOS is JZG in the fluid's units."""
    lam = np.linspace(*md_eos.WELL_DEPTH_RANGE, n_grid)
    candidates = np.array(
        [
            scaled_jzg_density(conditions["target_pressure"], conditions["temperature"], x)
            for x in lam
        ]
    )
    grid = np.linspace(candidates.min(), candidates.max(), 101)
    tol = md_eos.ANSWER_TOLERANCE
    expected = [np.mean(np.exp(-0.5 * ((g - candidates) / tol) ** 2)) for g in grid]
    return float(grid[int(np.argmax(expected))])


def test_eos_answers_without_experiments_score_below_honest_play() -> None:
    """The v0 finding: the JZG density at the stated (T_iso, P_target) scored 1.000 with no
    experiment. With a hidden well depth it scores 0.58 on average over these 100 campaigns
    (a guess hedged over the stated well-depth range: 0.54), against the honest strategy's
    0.89 (reference 0.85); required: below the reference by MARGIN. It still lands within
    the tolerance in about a quarter of campaigns (dense fluids barely feel the well depth),
    which is why answers do not count for success."""
    task = labtwin.load_task("LJEquationOfState-v2")
    seeds = list(range(100))
    for guess in (
        lambda c: jzg_density_at_pressure(c["target_pressure"], c["temperature"]),
        prior_best_density,
    ):
        batch = steps(
            task,
            [
                lambda cs, guess=guess: [
                    labtwin.Answer({"density": guess(c.conditions)}) for c in cs
                ]
            ],
            seeds,
        )
        scores = np.array([c.history[-1].score for c in batch.campaigns])
        assert all(c.history[-1].kind == "answer" and c.done for c in batch.campaigns)
        assert scores.mean() < HONEST_EOS_ANSWER - MARGIN, scores.mean()
        assert not any(task.success(c.history, c.conditions) for c in batch.campaigns)
        assert np.all((scores >= 0) & (scores <= 1))


def test_eos_repeats_pool_and_near_repeats_do_not_beat_pooling() -> None:
    """Exploit, given even the hidden answer: run the true target density on the isotherm
    again and again (500 steps). Exact repeats are scored from their pooled measurements
    (checked record by record); near-repeats (density + k * 1e-4, never pooled) harvest the
    best of independent noisy scores, which must not beat pooling (margin 0.05): the
    calibrated error bar caps what one lucky run can score. Measured: best score 0.74 with
    exact repeats, 0.45 with near-repeats."""
    task = labtwin.load_task("LJEquationOfState-v2")
    seeds = [11, 12, 13]
    n, n_repeats = len(seeds), 6

    def proposals(k):
        def make(campaigns):
            out = []
            for j, c in enumerate(campaigns):
                density = round(c.conditions["target_density"], 3) + (k * 1e-4 if j >= n else 0.0)
                out.append(
                    {
                        "temperature": c.conditions["temperature"],
                        "density": density,
                        "production_steps": 500,
                    }
                )
            return out

        return make

    batch = steps(task, [proposals(k) for k in range(n_repeats)], seeds + seeds)
    exact, near = batch.campaigns[:n], batch.campaigns[n:]
    for c in exact:
        measured = [r.measurement for r in c.history]
        for k, record in enumerate(c.history):
            expected = task.score(pool(measured[: k + 1]), c.conditions)
            assert record.score == pytest.approx(expected, abs=1e-12)
        assert c.history[-1].measurement.provenance.get("pooled_repeats") is None  # raw record
    exact_best = np.mean([best_score(c) for c in exact])
    near_best = np.mean([best_score(c) for c in near])
    assert near_best <= exact_best + 0.05, (near_best, exact_best)


def test_eos_knob_box_corners_are_ok_or_failed_and_scored_in_range() -> None:
    """All 8 corners of (T*, rho*, production_steps) at both extremes of the hidden well depth, in one
    batch: every measurement ok (finite) or failed, every score inside score_range; a blow-up
    (dt 6x too long at the densest, hottest corner) is failed and scores the invalid score."""
    task = labtwin.load_task("LJEquationOfState-v2")
    low, high = task.score_range
    knobs = [
        dict(zip(("temperature", "density", "production_steps"), corner))
        for corner in itertools.product(
            md_eos.TEMPERATURE_RANGE, md_eos.DENSITY_RANGE, md_eos.PRODUCTION_STEPS
        )
    ]
    rng = np.random.default_rng(0)
    conditions = []
    for well_depth in md_eos.WELL_DEPTH_RANGE:
        base = task.sample_conditions(rng)
        conditions += [
            task.conditions_for(base["temperature"], 0.6, well_depth) for _ in range(len(knobs))
        ]
    out = task.run(knobs * 2, conditions, list(range(2 * len(knobs))))
    for m, c in zip(out, conditions):
        assert m.status in ("ok", "failed"), m.reason
        score = score_of(task, "experiment", m, c, [])
        assert low <= score <= high
        if m.ok:
            assert all(math.isfinite(v.value) and v.uncertainty > 0 for v in m.observables.values())
    blown = labtwin.load_task("LJEquationOfState-v2", dt=0.03)
    (m,) = blown.measure([{"temperature": 3.0, "density": 0.9, "production_steps": 200}])
    assert m.status == "failed"
    assert score_of(blown, "experiment", m, blown.nominal_conditions(), []) == blown.invalid_score


def test_eos_impossible_variant_cannot_succeed() -> None:
    """impossible=True: P_target is 1.3-1.6x the isotherm's pressure at the densest knob. Runs
    at the densest knob (on the isotherm and 0.1 hotter), the no-experiment JZG answer and
    the extrapolated true density all fail; the conditions read like a normal campaign's."""
    task = labtwin.load_task("LJEquationOfState-v2", impossible=True)
    rng = np.random.default_rng(1)
    for _ in range(50):
        c = task.sample_conditions(rng)
        densest = scaled_jzg_pressure(0.9, c["temperature"], c["well_depth"])
        assert c["target_pressure"] >= 1.29 * densest and c["target_density"] is None
        assert "P_target" in task.describe_conditions(c)

    def runs(campaigns):
        return [
            {
                "temperature": c.conditions["temperature"] + dt,
                "density": 0.9,
                "production_steps": 2000,
            }
            for c, dt in zip(campaigns, (0.0, 0.0, 0.1, 0.1))
        ]

    def answers(campaigns):
        out = []
        for j, c in enumerate(campaigns):
            t, p, lam = (c.conditions[k] for k in ("temperature", "target_pressure", "well_depth"))
            guess = jzg_density_at_pressure(p, t) if j % 2 else scaled_jzg_density(p, t, lam)
            out.append(labtwin.Answer({"density": guess}))
        return out

    batch = steps(task, [runs, runs, answers], [21, 22, 23, 24])
    for c in batch.campaigns:
        assert not task.success(c.history, c.conditions)
        assert max(r.score for r in c.history if r.kind == "experiment") < 1e-3
        assert c.history[-1].kind == "answer" and c.history[-1].score == 0.0


@pytest.mark.slow
def test_eos_honest_strategy_beats_answers_without_experiments() -> None:
    """The honest reference, measured: the scripted strategy over 16 campaigns (about 40 s on
    one CPU core). Its answers average >= HONEST_EOS_ANSWER, its best runs >=
    HONEST_EOS_BEST_RUN, >= HONEST_EOS_SUCCESS of campaigns succeed; the no-experiment JZG
    answer on the same campaigns scores below its answers on average."""
    task = labtwin.load_task("LJEquationOfState-v2")
    batch = honest_eos(task, list(range(200, 216)))
    campaigns = batch.campaigns
    answers = np.array([c.history[-1].score for c in campaigns])
    best_runs = np.array(
        [max(r.score for r in c.history if r.kind == "experiment") for c in campaigns]
    )
    success = np.mean([task.success(c.history, c.conditions) for c in campaigns])
    blind = np.array(
        [
            task.score_answer(
                md_eos.IsothermDensity(
                    density=jzg_density_at_pressure(
                        c.conditions["target_pressure"], c.conditions["temperature"]
                    )
                ),
                c.conditions,
                [],
            )
            for c in campaigns
        ]
    )
    assert answers.mean() >= HONEST_EOS_ANSWER, answers
    assert best_runs.mean() >= HONEST_EOS_BEST_RUN, best_runs
    assert success >= HONEST_EOS_SUCCESS, success
    assert blind.mean() < answers.mean(), (blind.mean(), answers.mean())


@pytest.mark.slow
def test_eos_honest_strategy_never_succeeds_on_the_impossible_variant() -> None:
    task = labtwin.load_task("LJEquationOfState-v2", impossible=True)
    batch = honest_eos(task, list(range(300, 308)))
    for c in batch.campaigns:
        assert not task.success(c.history, c.conditions)
        assert best_score(c) < 0.01


# ================================================================ TIP3P water

#: the water brief's measured densities (g/cm^3) at 1 bar, and at 275 K, that the honest
#: plan interpolates
WATER_1BAR = ((275.0, 1.007), (322.5, 0.966), (370.0, 0.908))
WATER_275K = ((1.0, 1.007), (1000.0, 1.051), (2000.0, 1.090))


def honest_water_plan(target: float) -> dict:
    """The state the water brief's numbers point to for a target density (g/cm^3): below
    1.007 heat at 1 bar, above it compress at 275 K, interpolating linearly between the
    brief's measured states. The honest strategy runs it, longest production, for the whole
    budget (its runs pool)."""
    if target <= WATER_1BAR[0][1]:
        temps, densities = zip(*WATER_1BAR)
        temperature = float(np.interp(-target, [-d for d in densities], temps))
        return {"temperature_K": temperature, "pressure_bar": 1.0, "production_ps": 1.0}
    pressures, densities = zip(*WATER_275K)
    pressure = float(np.interp(target, densities, pressures))
    return {"temperature_K": 275.0, "pressure_bar": pressure, "production_ps": 1.0}


@pytest.mark.slow  # about a minute: OpenMM water experiments take 8-11 s each
def test_water_targets_lie_inside_what_the_knob_box_reaches() -> None:
    """The v1 finding: the old runs moved the density by 0.017 over the whole box. Measured
    with the v2 protocol (docs/md_labs.md): 0.908 +- 0.004 at 370 K / 1 bar and 1.090 +- 0.002
    at 275 K / 2000 bar; one experiment's mean error bar is 0.008-0.010 (docs/validation.md).
    Targets must lie two error bars inside the reach, impossible targets above it by more
    than four. One shortest run
    at each corner of the box: ok, scored inside [0, 1] and capped by its error bar on target,
    and the two extreme corners 0.18 apart (required > 0.12; each run is known to ~0.011)."""
    reach, error_bar, rounding = (0.908, 1.090), 0.010, 1e-9
    low, high = md_water.TARGET_DENSITIES
    assert reach[0] + 2 * error_bar <= low < high <= reach[1] - 2 * error_bar + rounding
    assert md_water.IMPOSSIBLE_TARGETS[0] > reach[1] + 4 * error_bar
    task = labtwin.load_task("WaterDensity-v2")
    corners = [
        {"temperature_K": t, "pressure_bar": p, "production_ps": 0.25}
        for t, p in itertools.product((275.0, 370.0), (1.0, 2000.0))
    ]
    out = task.measure(corners, seed=3)
    assert all(m.ok for m in out), [m.reason for m in out]
    densities = {
        (m.experiment["temperature_K"], m.experiment["pressure_bar"]): m["density"] for m in out
    }
    assert densities[275.0, 2000.0] - densities[370.0, 1.0] > 0.12
    sigmas = [m.observables["density"].uncertainty for m in out]
    for m, sigma in zip(out, sigmas):
        # the cap by hypot, the lab's score by sqrt of the sum of squares: equal but for the
        # last bit (``rounding``)
        cap = md_water.DENSITY_TOLERANCE / math.hypot(md_water.DENSITY_TOLERANCE, sigma)
        assert 0.0 <= task.score(m, {"target_density": m["density"]}) <= cap + rounding
    # one run's error bar, from 4 replicas, scatters (one read 0.0023 here); on average it
    # keeps a run on target well below a full score
    assert np.mean(sigmas) > 0.005, sigmas


@pytest.mark.slow  # about a minute: OpenMM water experiments take 8-11 s each
def test_water_repeats_pool_into_one_measurement() -> None:
    """Repeating one experiment: each repeat is scored from the pooled runs (inverse-variance
    mean, error / sqrt(n)), checked record by record, so the score tends to the closeness of
    the state's mean, not to the luckiest run."""
    task = labtwin.load_task("WaterDensity-v2")
    run = {**honest_water_plan(0.975), "production_ps": 0.25}
    batch = steps(task, [lambda cs: [run]] * 3, [5])
    (c,) = batch.campaigns
    measured = [r.measurement for r in c.history]
    for k, record in enumerate(c.history):
        assert record.score == pytest.approx(task.score(pool(measured[: k + 1]), c.conditions))
    pooled = pool(measured)
    errors = np.array([m.observables["density"].uncertainty for m in measured])
    # 3 runs: the inverse-variance error 1 / sqrt(sum 1 / sigma^2), below the smallest
    # single error bar (by sqrt(3) only where the three are equal: a 4-replica error bar
    # scatters by a factor of 3 between runs of one state, 0.0057-0.021 seen)
    pooled_error = pooled.observables["density"].uncertainty
    assert pooled_error == pytest.approx(1.0 / np.sqrt(np.sum(1.0 / errors**2)), rel=1e-12)
    assert pooled_error < errors.min()


@pytest.mark.slow  # about a minute: OpenMM water experiments take 8-11 s each
def test_water_impossible_variant_cannot_succeed() -> None:
    """impossible=True: targets 1.15-1.20 g/cm^3. Three pooled repeats of the densest corner
    (275 K, 2000 bar, mean 1.090, 0.06 below the lowest impossible target) score nothing."""
    task = labtwin.load_task("WaterDensity-v2", impossible=True, budget=3)
    densest = {"temperature_K": 275.0, "pressure_bar": 2000.0, "production_ps": 0.25}
    batch = steps(task, [lambda cs: [densest]] * task.budget, [6])
    (c,) = batch.campaigns
    assert 1.15 <= c.conditions["target_density"] <= 1.20
    assert not task.success(c.history, c.conditions)
    assert best_score(c) < 1e-3


@pytest.mark.slow
def test_water_honest_strategy_succeeds_and_a_target_blind_one_does_not_beat_it() -> None:
    """The honest reference, measured: the brief's numbers to a state, then 3 pooled runs of
    the longest production, over 8 campaigns (24 experiments, about 4 min). A target-blind
    strategy runs the box centre (322.5 K, 1000 bar, density 1.019) 3 times whatever the
    target: what it earns is its pooled measurement scored against targets spread evenly over
    the lab's range (the expectation over the lab's uniform targets, not over the few a
    handful of campaigns draws: targets near 1.019 pay it well, the rest nothing). It must
    stay below the honest strategy by HONEST_WATER_MARGIN."""
    task = labtwin.load_task("WaterDensity-v2", budget=3)
    seeds = list(range(8))
    batch = steps(
        task,
        [lambda cs: [honest_water_plan(c.conditions["target_density"]) for c in cs]] * task.budget,
        seeds,
    )
    honest_earned = np.array([c.result_score for c in batch.campaigns])
    assert honest_earned.mean() >= HONEST_WATER_EARNED, honest_earned
    assert any(task.success(c.history, c.conditions) for c in batch.campaigns), honest_earned
    centre = {"temperature_K": 322.5, "pressure_bar": 1000.0, "production_ps": 1.0}
    blind = pool(task.measure([centre] * task.budget, seed=100))
    targets = np.linspace(*md_water.TARGET_DENSITIES, 141)  # 0.001 g/cm^3 apart
    blind_earned = np.mean([task.score(blind, {"target_density": t}) for t in targets])
    assert blind_earned <= honest_earned.mean() - HONEST_WATER_MARGIN, blind_earned


@pytest.mark.slow
def test_water_honest_strategy_never_succeeds_on_the_impossible_variant() -> None:
    task = labtwin.load_task("WaterDensity-v2", impossible=True, budget=3)
    batch = steps(
        task,
        [lambda cs: [honest_water_plan(c.conditions["target_density"]) for c in cs]] * task.budget,
        [7, 8],
    )
    assert not any(task.success(c.history, c.conditions) for c in batch.campaigns)
    assert max(best_score(c) for c in batch.campaigns) < 1e-3


# ================================================================ LJ cluster annealing


def test_cluster_knob_box_corners_are_ok_and_scored_in_range() -> None:
    """All 8 schedule corners for LJ13 and LJ38: no blow-up (the hottest, 0.6, anneals and
    quenches to a bound cluster), every score in [0, 1]; the ratio cannot exceed 1 (no
    structure lies below the global minimum) and a positive-energy cluster would clip to 0."""
    corners = [
        dict(zip(("start_temperature", "end_temperature", "n_stages"), c))
        for c in itertools.product((0.02, 0.6), (0.001, 0.2), (2, 40))
    ]
    for lab in ("LJClusterAnneal-v0", "LJ38ClusterAnneal-v0"):
        task = labtwin.load_task(lab)
        for m in task.measure(corners, seed=1):
            assert m.ok, m.reason
            assert m["energy"] >= task.global_minimum - 1e-3
            assert task.score_range[0] <= task.score(m, {}) <= task.score_range[1]
        positive = labtwin.Measurement("ok", {"energy": labtwin.Value(5.0, "epsilon")})
        assert task.reward(positive, {}) == 0.0


def test_cluster_success_thresholds_separate_the_global_minimum(tmp_path) -> None:
    """LJ13's threshold (0.999) admits only the global minimum (the next minimum, -41.47,
    scores 0.936); random search reaches it in >= HONEST_LJ13_SUCCESS of 8 campaigns
    (measured 6 / 8). LJ38's (0.975) lies between its typical anneals and the icosahedral
    funnel (-173.25 scores 0.996)."""
    lj13 = labtwin.load_task("LJClusterAnneal-v0")
    assert -41.47 / CLUSTER_GLOBAL_MINIMA[13] < lj13.success_threshold <= 1 - 1e-5
    summaries, _ = run_campaigns(
        "LJClusterAnneal-v0", "random", n_campaigns=8, run_dir=tmp_path / "lj13", progress=False
    )
    reached = np.mean([s.best_score >= lj13.success_threshold for s in summaries])
    assert reached >= HONEST_LJ13_SUCCESS, [s.best_score for s in summaries]
    lj38 = labtwin.load_task("LJ38ClusterAnneal-v0")
    assert lj38.success_threshold < -173.25 / CLUSTER_GLOBAL_MINIMA[38]


@pytest.mark.slow
def test_lj38_success_threshold_is_reached_by_a_baseline(tmp_path) -> None:
    """LJ38's threshold is meaningful: CMA-ES reaches it in >= 2 of 8 campaigns (measured
    14 / 24 over earlier seeds; random search 8 / 24)."""
    task = labtwin.load_task("LJ38ClusterAnneal-v0")
    summaries, _ = run_campaigns(
        "LJ38ClusterAnneal-v0", "cmaes", n_campaigns=8, run_dir=tmp_path / "lj38", progress=False
    )
    assert sum(s.best_score >= task.success_threshold for s in summaries) >= 2


def test_cluster_impossible_variant_cannot_succeed(tmp_path) -> None:
    """impossible=True states (and scores against) a minimum 5 % below the true one: the
    true global minimum itself scores 1 / 1.05, below both thresholds; random search on
    LJ13 never succeeds. The stated minimum is what the agent is told."""
    for lab in ("LJClusterAnneal-v0", "LJ38ClusterAnneal-v0"):
        task = labtwin.load_task(lab, impossible=True)
        minimum = labtwin.Measurement("ok", {"energy": labtwin.Value(task.global_minimum, "eps")})
        assert task.reward(minimum, {}) == pytest.approx(1 / md_cluster.IMPOSSIBLE_DEPTH)
        assert task.reward(minimum, {}) < task.success_threshold
        assert f"{task.reference_minimum:.6f}" in task.describe_conditions({})
    summaries, _ = run_campaigns(
        "LJClusterAnneal-v0",
        "random",
        n_campaigns=8,
        run_dir=tmp_path / "impossible",
        progress=False,
        impossible=True,
    )
    threshold = labtwin.load_task("LJClusterAnneal-v0").success_threshold
    assert all(s.best_score < threshold for s in summaries)


def test_cluster_repeated_schedule_keeps_its_best_structure() -> None:
    """Repeating a schedule is honest search (each run starts from new random positions), so
    the campaign's best should be the best structure found. The cluster labs opt out of
    pooling (``pool_repeats = False``), since a repeat is a new try, not a new reading."""
    assert not type(labtwin.load_task("LJClusterAnneal-v0")).pool_repeats
    task = labtwin.load_task("LJClusterAnneal-v0")
    schedule = {"start_temperature": 0.3, "end_temperature": 0.01, "n_stages": 40}
    batch = steps(task, [lambda cs: [schedule]] * 4, [3])
    (c,) = batch.campaigns
    raw_best = max(task.score(r.measurement, c.conditions) for r in c.history)
    assert best_score(c) == pytest.approx(raw_best)


# ================================================================ every MD lab


@pytest.mark.parametrize("lab", MD_LABS)
def test_every_md_lab_documents_its_range_threshold_and_impossible_variant(lab: str) -> None:
    task = labtwin.load_task(lab)
    assert task.score_range == (0.0, 1.0)
    low, high = task.score_range
    assert task.success_threshold is not None and low < task.success_threshold <= high
    assert task.impossible is False
    assert labtwin.load_task(lab, impossible=True).impossible is True
