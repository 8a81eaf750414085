"""The vector env's fast bookkeeping gives what one campaign at a time gives.

``VectorLabEnv`` builds experiment records in one call, keeps budget counts as records are
appended, writes step infos a column at a time and finds repeats through a hash index.
Here every env of a vector env is checked, step by step, against a ``LabEnv`` reset with
the same seed and given the same actions (invalid rows, repeats and autoreset included):
observations, rewards, flags, infos and every record field by field. All exact.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import pytest

import labtwin
from labtwin.campaign import Campaign, Record, _experiment_key
from labtwin.env import LabEnv
from labtwin.measurement import Measurement, Value
from labtwin.vector import VectorLabEnv


class Mix(labtwin.Experiment):
    temperature_K: float = labtwin.knob(280.0, 380.0, unit="K", description="bath")
    time_s: float = labtwin.knob(1.0, 1000.0, unit="s", description="hold time", log=True)
    catalyst: Literal["Pd", "Pt", "Ni"] = "Pd"


class NoisyLab(labtwin.Task):
    id = "NoisyRecords-v0"
    experiment_model = Mix
    observables = (labtwin.ObservableSpec("signal", "", "a reading", scale=2.0),)
    public_conditions = (labtwin.ObservableSpec("target_K", "K", "target", scale=100.0),)
    default_budget = 4

    def sample_conditions(self, rng: np.random.Generator) -> dict[str, Any]:
        return {"target_K": float(rng.uniform(300.0, 360.0))}

    def simulate(self, experiments, conditions, rngs):
        return [
            labtwin.Measurement(
                "ok",
                {"signal": labtwin.Value(e.temperature_K / 380 + rng.standard_normal(), "", 0.1)},
            )
            for e, rng in zip(experiments, rngs)
        ]

    def reward(self, measurement, conditions):
        return measurement["signal"]


def _actions(rng: np.random.Generator, n: int) -> np.ndarray:
    """Random actions with out-of-range and NaN rows, and a repeated row (pooled scores)."""
    actions = rng.uniform(-1.0, 1.0, (n, 3))
    actions[rng.random(n) < 0.15] = 1.5
    actions[rng.random(n) < 0.1, 1] = np.nan
    actions[rng.random(n) < 0.3] = [0.2, -0.4, 0.1]
    return actions


def _same_record(a: Record, b: Record) -> None:
    """Field by field; campaign ids aside (a vector env numbers campaigns across its envs)."""
    for name in Record.__dataclass_fields__:
        if name == "campaign":
            continue
        x, y = getattr(a, name), getattr(b, name)
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            assert type(x) is type(y) and x.dtype == y.dtype, name
            np.testing.assert_array_equal(x, y, err_msg=name)
        else:
            assert x == y, name
    assert {**a.to_dict(), "campaign": 0} == {**b.to_dict(), "campaign": 0}


def _env_info(infos: dict[str, Any], i: int) -> dict[str, Any]:
    """Env ``i``'s entries of a vector env's infos (its masked keys, nested ones left out)."""
    return {
        k: v[i]
        for k, v in infos.items()
        if not k.startswith("_")
        and not isinstance(v, dict)
        and k != "final_obs"
        and infos[f"_{k}"][i]
    }


@pytest.mark.parametrize(
    "reward_mode, penalty, mode",
    [
        ("improvement", 0.0, "NextStep"),
        ("score", 0.5, "NextStep"),
        ("improvement", 0.2, "SameStep"),
    ],
)
def test_vector_env_steps_as_lab_envs_one_at_a_time(reward_mode, penalty, mode) -> None:
    n, seed = 5, 11
    venv = VectorLabEnv(
        NoisyLab(), n, reward_mode=reward_mode, invalid_penalty=penalty, autoreset_mode=mode
    )
    envs = [LabEnv(NoisyLab(), reward_mode=reward_mode, invalid_penalty=penalty) for _ in range(n)]
    obs, _ = venv.reset(seed=seed)
    for i, env in enumerate(envs):
        np.testing.assert_array_equal(obs[i], env.reset(seed=seed + i)[0])
    rng = np.random.default_rng(0)
    resetting = np.zeros(n, dtype=bool)
    ended, kinds = 0, set()
    for _ in range(23):
        actions = _actions(rng, n).astype(np.float32)  # what a Box(float32) agent sends
        before = list(venv.campaigns)
        obs, rewards, terminated, truncated, infos = venv.step(actions)
        for i, env in enumerate(envs):
            if resetting[i]:  # NEXT_STEP: this step only reset the env
                o, _ = env.reset()
                np.testing.assert_array_equal(obs[i], o)
                assert rewards[i] == 0.0 and not terminated[i]
                assert infos["campaign_seed"][i] == env.campaign.seed
                continue
            o, r, term, trunc, info = env.step(actions[i])
            assert rewards[i] == r and terminated[i] == term and truncated[i] == trunc
            record = before[i].history[-1]
            _same_record(record, env.campaign.history[-1])
            kinds.add(record.measurement.status)
            final = term and mode == "SameStep"
            got = _env_info(infos["final_info"] if final else infos, i)
            assert set(got) == set(info)
            for key, value in info.items():
                assert got[key] == value or (value != value and got[key] != got[key]), key
            if final:
                np.testing.assert_array_equal(infos["final_obs"][i], o)
                o, _ = env.reset()
            np.testing.assert_array_equal(obs[i], o)
            ended += bool(term)
        for i, env in enumerate(envs):  # each campaign's whole history, record by record
            mine, theirs = venv.campaigns[i], env.campaign
            assert len(mine.history) == len(theirs.history)
            for a, b in zip(mine.history, theirs.history):
                _same_record(a, b)
            assert mine.experiments == theirs.experiments
            assert mine.best_score == theirs.best_score and mine.seed == theirs.seed
        resetting = terminated | truncated if mode == "NextStep" else np.zeros(n, dtype=bool)
    assert ended >= 2 * n  # autoreset ran for every env, more than once
    assert kinds == {"ok", "invalid"}


def _measured(experiment: Any, value: float, status: str = "ok") -> Measurement:
    return Measurement(status, {"signal": Value(value, "", 0.1)}, experiment=experiment)


def test_repeat_index_finds_what_a_scan_finds_even_when_hashes_collide() -> None:
    """``repeats_of`` against the plain scan of :func:`score_of` (``m.ok and m.experiment
    == experiment``), with experiments whose hashes collide (``hash(-1) == hash(-2)``),
    unhashable values, failed readings, answers and a replaced history."""
    assert _experiment_key({"x": -1}) == _experiment_key({"x": -2})
    task = NoisyLab()
    campaign = Campaign(task, 0, 0, np.random.default_rng(0), {}, 20)
    proposals = [
        {"x": -1},
        {"x": -2},
        {"x": -1},
        {"x": 1.0},
        {"x": 1},
        {"x": [1, 2]},
        {"x": -2},
        {"x": [1, 2]},
        {"x": -1},
        None,
    ]
    rng = np.random.default_rng(1)

    def scan(experiment: Any) -> list[Measurement]:
        return [m for m in campaign.measurements() if m.ok and m.experiment == experiment]

    for step, experiment in enumerate(proposals * 2):
        assert campaign.repeats_of(experiment) == scan(experiment)
        assert all(a is b for a, b in zip(campaign.repeats_of(experiment), scan(experiment)))
        status = "failed" if rng.random() < 0.2 else "ok"
        kind = "answer" if step % 7 == 6 else "experiment"
        m = _measured(experiment, float(rng.standard_normal()), status)
        campaign.history.append(Record(0, step, kind, m, 0.0, 0.0, experiment))
    for experiment in proposals:
        assert campaign.repeats_of(experiment) == scan(experiment)
    campaign.history = campaign.history[:5]  # replaced: indexed again
    for experiment in proposals:
        assert campaign.repeats_of(experiment) == scan(experiment)


def test_repeats_indexed_as_the_batch_appends_match_a_scan_and_score_of() -> None:
    """The batch indexes each measured experiment as it appends its record; every step's
    pooled score equals :func:`score_of` over a plain scan of the history before it, and
    the index answers as the scan does after each step, also when a record was appended
    by hand in between (the index catches up) and after the history was replaced. The
    recommendation kept as records are appended is :func:`recommended` of the history."""
    from labtwin.campaign import CampaignBatch, recommended, score_of

    task = NoisyLab(budget=40)
    batch = CampaignBatch(task, 1, max_turns=60)
    campaign = batch.reset([0], [3])[0]
    choices = [{"temperature_K": 300.0, "time_s": 10.0, "catalyst": c} for c in ("Pd", "Pt")]
    rng = np.random.default_rng(2)
    for step in range(24):
        proposal = choices[int(rng.integers(2))]
        if step % 5 == 0:  # a new experiment, or one the lab rejects
            proposal = {"temperature_K": 290.0 + step, "time_s": 5.0}
        elif step % 7 == 3:
            proposal = {"temperature_K": 1e9}
        before = [r.measurement for r in campaign.history if r.kind == "experiment"]
        record = batch.step([0], [proposal])[0]
        scan = [m for m in before if m.ok and m.experiment == record.measurement.experiment]
        expected = score_of(task, "experiment", record.measurement, campaign.conditions, before)
        assert record.score == expected
        if record.measurement.ok:  # it is among its own repeats now, after those before it
            assert campaign.repeats_of(record.measurement.experiment) == [*scan, record.measurement]
        assert campaign.recommended() is recommended(campaign.history)
        if step == 11:  # a record appended outside the batch: the index catches up
            m = _measured(choices[0], 9.0)
            campaign.history.append(Record(campaign.id, step, "experiment", m, 0.0, 0.0))
        for experiment in choices:
            found = campaign.repeats_of(experiment)
            expected_found = [
                m for m in campaign.measurements() if m.ok and m.experiment == experiment
            ]
            assert all(a is b for a, b in zip(found, expected_found))
            assert len(found) == len(expected_found)
    assert all(len(campaign.repeats_of(e)) >= 3 for e in choices)  # repeats were pooled
    assert campaign.recommended() is recommended(campaign.history)
    campaign.history = campaign.history[:7]
    assert campaign.recommended() is recommended(campaign.history)
    for experiment in choices:
        scan = [m for m in campaign.measurements() if m.ok and m.experiment == experiment]
        assert campaign.repeats_of(experiment) == scan
