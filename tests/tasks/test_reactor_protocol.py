"""The temperature-programme reactor: a text-only lab checked against the batch reactor's physics."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import labtwin
from labtwin.simulators.kinetics.network import INTEGRATION_ERROR
from labtwin.tasks.reactor import NOMINAL, WORKUP_MIN
from labtwin.tasks.reactor_protocol import MAX_STAGES, SAMPLES_PER_STAGE, TemperatureProgramme

# float64 round-off of one deterministic computation done twice, possibly with
# a different batch size (BLAS may sum the 3-term rates @ stoichiometry product
# in another order): a few ulp per RK4 step, far below any physical effect
ROUND_OFF = 1e-12
EPS = float(np.finfo(np.float64).eps)


def programme(feed: float, catalyst: float, *stages: tuple[float, float]) -> dict:
    """An experiment from ``(temperature_K, time_min)`` stages."""
    return {
        "feed_conc_mol_L": feed,
        "catalyst_mol_pct": catalyst,
        "steps": [{"temperature_K": T, "time_min": t} for T, t in stages],
    }


def reagents(seed: int) -> dict:
    """A campaign's perturbed kinetics (not the nominal lab, to exercise the conditions)."""
    return labtwin.load_task("ReactorProtocol-v1").sample_conditions(np.random.default_rng(seed))


def assert_same_measurement(a: labtwin.Measurement, b: labtwin.Measurement) -> None:
    assert (a.status, a.reason) == (b.status, b.reason)
    assert a.cost == pytest.approx(b.cost, rel=ROUND_OFF)
    assert set(a.observables) == set(b.observables)
    for name, value in a.observables.items():
        assert value.value == pytest.approx(b.observables[name].value, rel=ROUND_OFF, abs=1e-15)
        assert value.uncertainty == pytest.approx(b.observables[name].uncertainty, rel=ROUND_OFF)
    np.testing.assert_allclose(
        a.artifacts["time_course"], b.artifacts["time_course"], rtol=ROUND_OFF, atol=1e-15
    )


def test_is_a_text_lab_with_the_reactors_conditions() -> None:
    task = labtwin.load_task("ReactorProtocol-v1")
    assert task.numeric_view is None  # a list of stages has no Box reading
    assert task.budget == 12 and task.cost_unit == "h"
    reactor = labtwin.load_task("BatchReactor-v1")
    rng = np.random.default_rng
    assert task.sample_conditions(rng(3)) == reactor.sample_conditions(rng(3))
    assert task.nominal_conditions() == NOMINAL
    schema = labtwin.tool_schema(TemperatureProgramme)
    assert schema["properties"]["steps"]["maxItems"] == MAX_STAGES


def test_random_experiments_are_valid_and_vary_in_length() -> None:
    task = labtwin.load_task("ReactorProtocol-v1")
    rng = np.random.default_rng(0)
    drawn = [task.random_experiment(rng) for _ in range(200)]
    assert {len(e.steps) for e in drawn} == set(range(1, MAX_STAGES + 1))
    for e in drawn:  # re-validation checks every bound
        assert TemperatureProgramme.model_validate_json(e.model_dump_json()) == e
    times = np.array([s.time_min for e in drawn for s in e.steps])
    assert np.mean(times < 11.0) == pytest.approx(0.5, abs=0.1)  # log-uniform: median ~ 11 min


@pytest.mark.parametrize("noise", [0.0, 1.0])
def test_one_stage_is_a_batch_reactor_run(noise: float) -> None:
    """A one-stage programme is the same integration and the same HPLC draw as BatchReactor."""
    conditions = reagents(7)
    run = {
        "temperature_K": 341.0,
        "time_min": 45.0,
        "feed_conc_mol_L": 0.8,
        "catalyst_mol_pct": 2.5,
    }
    (reactor,) = labtwin.load_task("BatchReactor-v1", noise=noise).measure(
        [run], seed=11, conditions=conditions
    )
    task = labtwin.load_task("ReactorProtocol-v1", noise=noise)
    (staged,) = task.measure([programme(0.8, 2.5, (341.0, 45.0))], seed=11, conditions=conditions)
    assert staged.artifacts["time_course"].shape == (SAMPLES_PER_STAGE, 5)
    assert_same_measurement(staged, reactor)


def test_two_stages_at_one_temperature_are_one_longer_stage() -> None:
    """Splitting a run changes only the integrator's steps; the difference is within
    twice its stated error, :data:`INTEGRATION_ERROR` of the feed."""
    conditions = reagents(5)
    task = labtwin.load_task("ReactorProtocol-v1", noise=0.0)
    feed, catalyst, T, t1, t2 = 1.2, 4.0, 365.0, 7.0, 13.0
    split, whole = task.measure(
        [programme(feed, catalyst, (T, t1), (T, t2)), programme(feed, catalyst, (T, t1 + t2))],
        conditions=conditions,
    )
    t, tolerance = t1 + t2, 2 * INTEGRATION_ERROR
    for species in "ABCD":
        name = f"conc_{species}"
        assert split[name] == pytest.approx(whole[name], rel=tolerance, abs=tolerance * feed)
    course = split.artifacts["time_course"]
    assert course.shape == (1 + 2 * (SAMPLES_PER_STAGE - 1), 5)
    assert course[-1, 0] == pytest.approx(t) and course[SAMPLES_PER_STAGE - 1, 0] == t1
    assert split.cost == pytest.approx(whole.cost) == pytest.approx((t + WORKUP_MIN) / 60)


def test_mass_balance_holds_at_every_sample_of_the_time_course() -> None:
    """A -> B, B -> C and 2A -> D conserve A + B + C + 2D (moles of A units per litre).

    Runge-Kutta methods keep linear invariants exactly; what remains is round-off, a
    few ulp per step over at most MAX_STAGES * 1000 steps (a stage takes 40 to about
    350). (Noise off, the monitored
    time course reads the integration exactly.)
    """
    task = labtwin.load_task("ReactorProtocol-v1", noise=0.0)
    rng = np.random.default_rng(1)
    batch = [task.random_experiment(rng) for _ in range(12)]
    tolerance = 4 * EPS * MAX_STAGES * 1000
    for experiment, m in zip(batch, task.measure(batch, conditions=reagents(2))):
        assert m.ok, m.reason
        course = m.artifacts["time_course"]
        feed = experiment.feed_conc_mol_L
        assert course.shape == (1 + (SAMPLES_PER_STAGE - 1) * len(experiment.steps), 5)
        a, b, c, d = course[:, 1:].T
        np.testing.assert_allclose(a + b + c + 2 * d, feed, rtol=tolerance)
        assert np.all(np.diff(course[:, 0]) > 0) and course[0, 0] == 0.0
        total = sum(s.time_min for s in experiment.steps)
        assert course[-1, 0] == pytest.approx(total)
        assert m.cost == pytest.approx((total + WORKUP_MIN) / 60)
        assert m["yield_B"] == pytest.approx(course[-1, 2] / feed)  # noise off: exact reading


def test_a_batch_measures_each_experiment_as_alone() -> None:
    """Shorter programmes get zero-length stages in a batch; results must not notice."""
    task = labtwin.load_task("ReactorProtocol-v1")
    rng = np.random.default_rng(4)
    batch = [task.random_experiment(rng) for _ in range(8)]
    batch.append(programme(0.5, 1.0, *[(330.0, 30.0)] * MAX_STAGES))  # the longest programme
    conditions = [reagents(10 + i) for i in range(len(batch))]
    seeds = [100 + i for i in range(len(batch))]
    together = task.run(batch, conditions, seeds)
    for i, m in enumerate(together):
        (alone,) = task.run([batch[i]], [conditions[i]], [seeds[i]])
        assert_same_measurement(m, alone)
    assert len({round(m["yield_B"], 9) for m in together}) == len(batch)  # noise on, distinct


def best_yield(task: labtwin.Task, candidates: list[dict]) -> tuple[float, dict]:
    yields = [m["yield_B"] for m in task.measure(candidates)]
    i = int(np.argmax(yields))
    return yields[i], candidates[i]


def test_hot_then_cool_beats_every_isothermal_run_of_the_same_length() -> None:
    """E(A -> B) < E(B -> C): hot while A is plentiful, then cool to spare B, wins.

    At the nominal lab, noise off, the most dilute feed and the most catalyst
    (both help B at any temperature): the best single stage (a grid over
    temperature and time, then a finer grid around its best) against two-stage
    programmes of at most the same 120 min.
    """
    task = labtwin.load_task("ReactorProtocol-v1", noise=0.0)
    feed, catalyst = 0.1, 5.0
    coarse = [
        programme(feed, catalyst, (T, t))
        for T in np.arange(300.0, 380.5, 1.0)
        for t in np.geomspace(1.0, 120.0, 30)
    ]
    iso_coarse, best = best_yield(task, coarse)
    (stage,) = best["steps"]
    T0, t0 = stage["temperature_K"], stage["time_min"]
    fine = [
        programme(feed, catalyst, (T, t))
        for T in np.clip(np.linspace(T0 - 1.0, T0 + 1.0, 21), 300.0, 380.0)
        for t in np.geomspace(max(1.0, t0 / 1.2), min(120.0, t0 * 1.2), 21)
    ]
    iso_best, _ = best_yield(task, fine)
    grid_error = iso_best - iso_coarse  # how much refining gained: the search's resolution
    hot_then_cool = [
        programme(feed, catalyst, (T1, t1), (T2, 120.0 - t1))
        for T1 in np.arange(330.0, 380.5, 5.0)
        for T2 in np.arange(300.0, 330.5, 2.0)
        for t1 in np.geomspace(1.0, 40.0, 8)
    ]
    staged_best, winner = best_yield(task, hot_then_cool)
    (T1, t1), (T2, t2) = ((s["temperature_K"], s["time_min"]) for s in winner["steps"])
    assert T1 > T2
    # the gain (~0.5 % yield) is tens of times the isothermal search's resolution
    assert staged_best - iso_best > max(1e-3, 10 * grid_error)
    (reversed_order,) = task.measure([programme(feed, catalyst, (T2, t2), (T1, t1))])
    assert reversed_order["yield_B"] < iso_best  # cool then hot loses: the order matters


@pytest.mark.parametrize(
    ("proposal", "reason"),
    [
        (programme(0.5, 1.0), "steps: List should have at least 1 item"),
        (programme(0.5, 1.0, *[(330.0, 10.0)] * 5), "steps: List should have at most 4 items"),
        (
            programme(0.5, 1.0, (330.0, 10.0), (500.0, 10.0)),
            "steps.1.temperature_K: Input should be less than or equal to 380",
        ),
        (
            {**programme(0.5, 1.0), "steps": {"temperature_K": 330.0}},
            "steps: Input should be a valid list",
        ),
        ({**programme(0.5, 1.0), "steps": 330.0}, "steps: Input should be a valid list"),
        (
            programme(0.5, 1.0, (330.0, 0.0)),
            "steps.0.time_min: Input should be greater than or equal to 1",
        ),
        (
            {**programme(0.5, 1.0), "steps": [{"temperature_K": 330.0, "time_min": 5, "rpm": 3}]},
            "steps.0.rpm: unknown field",
        ),
        ([330.0, 10.0], "no numeric view"),
        ('{"feed_conc_mol_L": 0.5, "steps": [', "malformed JSON"),
    ],
)
def test_bad_programmes_are_invalid_measurements(proposal: object, reason: str) -> None:
    task = labtwin.load_task("ReactorProtocol-v1")
    good = programme(0.5, 1.0, (330.0, 10.0))
    bad, ok = task.measure([proposal, good])
    assert bad.status == "invalid" and reason in bad.reason, bad.reason
    assert bad.cost == 0.0 and ok.ok  # a bad proposal does not spoil its batch


def test_a_campaign_takes_the_experiment_as_json_text() -> None:
    env = labtwin.make("ReactorProtocol-v1")
    assert isinstance(env.action_space, gym.spaces.Text)
    env.reset(seed=3)
    action = json.dumps(programme(0.2, 5.0, (360.0, 3.0), (315.0, 100.0)))
    _, reward, terminated, truncated, info = env.step(action)
    measurement = info["measurement"]
    assert measurement.ok and not (terminated or truncated)
    assert reward == info["score"] == measurement["yield_B"]  # first step: improvement on 0
    (again,) = labtwin.load_task("ReactorProtocol-v1").run(
        [action], [env.unwrapped.campaign.conditions], [measurement.provenance["seed"]]
    )
    assert again["yield_B"] == measurement["yield_B"]  # a record can be re-measured
    check_env(env.unwrapped, skip_render_check=True)


def programme_actions(seed: int, n: int = 3) -> list[str]:
    """Valid random programmes as JSON text (the Text space's own samples are never valid)."""
    task, rng = labtwin.load_task("ReactorProtocol-v1"), np.random.default_rng(seed)
    return [task.random_experiment(rng).model_dump_json() for _ in range(n)]


def test_seeded_campaigns_repeat_and_differ_between_seeds() -> None:
    def rollout(seed: int) -> list[tuple]:
        env = labtwin.make("ReactorProtocol-v1")
        env.reset(seed=seed)
        return [env.step(a)[1:] for a in programme_actions(seed)]

    a, b, c = rollout(7), rollout(7), rollout(8)
    assert a == b  # reward, flags and full Measurement equality (artifacts included)
    assert all(x[0] != y[0] for x, y in zip(a, c))


def test_vector_env_equals_single_envs_with_real_programmes() -> None:
    """Slot i of a vector env seeded s is a LabEnv seeded s + i; programmes of mixed length."""
    n, seed = 3, 11
    actions = list(zip(*(programme_actions(seed + i) for i in range(n))))
    venv = labtwin.make_vec("ReactorProtocol-v1", n)
    venv.reset(seed=seed)
    vec_rewards = [venv.step(list(step))[1] for step in actions]
    for i in range(n):
        env = labtwin.make("ReactorProtocol-v1")
        env.reset(seed=seed + i)
        for k, step in enumerate(actions):
            reward = env.step(step[i])[1]
            assert reward == pytest.approx(vec_rewards[k][i], rel=ROUND_OFF, abs=1e-15)
    assert np.all(np.concatenate(vec_rewards) >= 0) and np.any(np.concatenate(vec_rewards) > 0)
