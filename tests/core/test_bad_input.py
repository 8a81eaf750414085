"""Bad proposals become invalid measurements with a clear reason; nothing escapes step."""

from __future__ import annotations

import numpy as np
import pytest

import labtwin

GOOD = {"temperature_K": 340.0, "time_min": 30.0, "feed_conc_mol_L": 0.5, "catalyst_mol_pct": 1.0}

CASES = [
    ({**GOOD, "temperature_K": 1000.0}, "temperature_K: Input should be less than or equal to 380"),
    ({**GOOD, "time_min": -5}, "time_min: Input should be greater than or equal to 1"),
    ({**GOOD, "temperature_K": float("nan")}, "temperature_K: Input should be a finite number"),
    ({**GOOD, "temperature_K": "hot"}, "temperature_K: Input should be a valid number"),
    ({**GOOD, "pressure_bar": 3.0}, "pressure_bar: unknown field"),
    ({"temperature_K": 340.0}, "time_min: field required"),
    ('{"temperature_K": 340, "time_min": ', "malformed JSON"),
    ("[1, 2, 3]", "an experiment must be a JSON object"),
    (42, "an experiment must be a JSON object"),
    (np.array([0.1, np.nan, 0.0, 0.0]), "action is not finite for ['time_min']"),
    (np.array([0.1, 2.0, 0.0, 0.0]), "action[1] (time_min) = 2 lies outside [-1, 1]"),
    (np.array([0.1, 0.2]), "action must have shape (4,)"),
    (labtwin.Answer({"activation_energy_kJ_mol": 60}), "takes no final answer"),
    ({"answer": {"activation_energy_kJ_mol": 60}}, "answer: unknown field"),  # not in-band
]


@pytest.mark.parametrize("proposal, reason", CASES)
def test_invalid_proposal_is_a_measurement(proposal, reason: str) -> None:
    env = labtwin.make("BatchReactor-v1", budget=3, invalid_penalty=0.1)
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(proposal)
    m = info["measurement"]
    assert m.status == "invalid"
    assert reason in m.reason, m.reason
    assert reward == pytest.approx(-0.1)
    assert not terminated and not truncated
    assert obs[1, 0] == 1.0 and obs[1, 1] == 0.0  # the slot is used, marked not ok
    assert obs[0, 0] == pytest.approx(2 / 3)  # header: share of the budget left
    assert m.proposal is not None or proposal is None  # the raw proposal is kept
    # the campaign goes on
    _, _, _, _, info = env.step(GOOD)
    assert info["measurement"].status == "ok"


def test_measure_mixes_valid_and_invalid_in_one_batch() -> None:
    task = labtwin.load_task("BatchReactor-v1")
    out = task.measure([GOOD, "{oops", {**GOOD, "catalyst_mol_pct": 9}, GOOD], seed=1)
    assert [m.status for m in out] == ["ok", "invalid", "invalid", "ok"]
    assert out[0].experiment == GOOD and out[0].cost > 0 and out[1].cost == 0


def test_blown_up_simulation_is_failed_not_raised() -> None:
    """Non-finite results from a simulator become a failed measurement."""

    class Exploding(labtwin.Task):
        id = "Exploding-v0"
        experiment_model = type(labtwin.load_task("ArrheniusFit-v1")).experiment_model
        observables = (labtwin.ObservableSpec("x", "", "a value"),)

        def simulate(self, experiments, conditions, rngs):
            return [
                labtwin.Measurement("ok", {"x": labtwin.Value(float("inf"), "")})
                for _ in experiments
            ]

        def reward(self, measurement, conditions):
            return measurement["x"]

    env = labtwin.LabEnv(Exploding(budget=2))
    env.reset(seed=0)
    _, reward, _, _, info = env.step(env.action_space.sample())
    assert info["measurement"].status == "failed"
    assert "non-finite" in info["measurement"].reason
    assert reward == 0.0


def test_invalid_answers_and_valid_answers() -> None:
    env = labtwin.make("ArrheniusFit-v1")
    env.reset(seed=0)
    answer = labtwin.Answer({"activation_energy_kJ_mol": "sixty"})
    _, reward, terminated, _, info = env.step(answer)
    assert info["measurement"].status == "invalid" and not terminated and reward == 0.0
    assert env.unwrapped.campaign.history[-1].kind == "answer"
    _, reward, terminated, _, info = env.step(labtwin.Answer('{"activation_energy_kJ_mol": 70}'))
    assert info["measurement"].status == "ok" and terminated and 0.0 < reward <= 1.0
