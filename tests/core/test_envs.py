"""Labs as Gymnasium envs: registry, autoreset modes, rewards, observations, turn caps.

Checker, seeding and vector-equals-single for every lab are in test_check_lab.py.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import labtwin


def test_registry_lists_the_catalog() -> None:
    ids = labtwin.list_tasks()
    assert "labtwin/BatchReactor-v1" in ids
    assert all(i.startswith("labtwin/") and "-v" in i for i in ids)
    for task_id in ids:
        assert labtwin.load_task(task_id).id == task_id.split("/", 1)[1]


def test_gymnasium_make_and_make_vec(task_id: str) -> None:
    env = gym.make(task_id)
    assert isinstance(env.unwrapped, labtwin.LabEnv)
    venv = gym.make_vec(task_id, num_envs=3, vectorization_mode="vector_entry_point")
    assert isinstance(venv, labtwin.VectorLabEnv) and venv.num_envs == 3


def test_vector_env_autoresets_next_step() -> None:
    venv = labtwin.make_vec("BatchReactor-v1", 2, budget=2)
    venv.reset(seed=0)
    a = venv.action_space.sample()
    venv.step(a)
    _, _, terminated, _, _ = venv.step(a)
    assert terminated.all()
    obs, rewards, terminated, _, _ = venv.step(a)  # the reset step
    assert not terminated.any() and np.all(rewards == 0.0) and np.all(obs[:, 1:] == 0.0)
    assert np.all(obs[:, 0, 0] == 1.0)  # a fresh campaign: the whole budget left
    _, _, terminated, _, info = venv.step(a)
    assert not terminated.any() and list(info["experiments_done"]) == [1, 1]


def test_vector_env_autoresets_same_step() -> None:
    """Same-step mode: the step that ends a campaign returns the next campaign's first
    observation, with the final one in infos["final_obs"]; no step is spent on the reset."""
    venv = labtwin.make_vec("BatchReactor-v1", 2, budget=2, autoreset_mode="SameStep")
    venv.reset(seed=0)
    a = venv.action_space.sample()
    venv.step(a)
    obs, _, terminated, _, info = venv.step(a)
    assert terminated.all() and info["_final_obs"].all()
    assert np.all(obs[:, 1:] == 0.0)  # already the new campaigns
    assert all(np.all(f[1:, 0] == 1.0) for f in info["final_obs"])  # both rows filled
    assert list(info["final_info"]["experiments_done"]) == [2, 2]
    _, _, terminated, _, info = venv.step(a)
    assert not terminated.any() and list(info["experiments_done"]) == [1, 1]
    assert "final_obs" not in info


def test_improvement_rewards_sum_to_best_score() -> None:
    env = labtwin.make("BatchReactor-v1", budget=6)
    env.reset(seed=3)
    env.action_space.seed(3)
    total, scores = 0.0, []
    for _ in range(6):
        _, reward, terminated, _, info = env.step(env.action_space.sample())
        total += reward
        scores.append(info["score"])
    assert terminated
    assert total == pytest.approx(max(max(scores), 0.0), abs=1e-12)


def test_text_and_numeric_proposals_agree() -> None:
    """A JSON proposal and the numeric vector of the same experiment measure the same."""
    task = labtwin.load_task("BatchReactor-v1")
    experiment = {
        "temperature_K": 340.0,
        "time_min": 30.0,
        "feed_conc_mol_L": 0.5,
        "catalyst_mol_pct": 2.5,
    }
    vector = task.numeric_view.to_vector(task.experiment_model(**experiment))
    as_text = labtwin.make("BatchReactor-v1")
    as_vector = labtwin.make("BatchReactor-v1")
    as_text.reset(seed=5)
    as_vector.reset(seed=5)
    _, _, _, _, info_text = as_text.step(
        '{"temperature_K": 340, "time_min": 30, "feed_conc_mol_L": 0.5, "catalyst_mol_pct": 2.5}'
    )
    _, _, _, _, info_vec = as_vector.step(vector)
    m_text, m_vec = info_text["measurement"], info_vec["measurement"]
    for name, value in m_text.observables.items():
        # float32 action vector: experiment recovered to ~1e-6 relative
        assert m_vec.observables[name].value == pytest.approx(value.value, rel=1e-4, abs=1e-6)


def test_numeric_observation_states_what_the_llm_is_told() -> None:
    """LJ EOS: the isotherm and target pressure stated to an LLM are in row 0 of the
    numeric observation (both views solve the same task)."""
    env = labtwin.make("LJEquationOfState-v2")
    obs, _ = env.reset(seed=4)
    conditions = env.unwrapped.campaign.conditions
    assert obs[0, 0] == 1.0
    np.testing.assert_allclose(
        obs[0, 1:3], [conditions["temperature"], conditions["target_pressure"]], rtol=1e-6
    )
    told = env.unwrapped.task.describe_conditions(conditions)
    assert f"{conditions['target_pressure']:.3f}" in told


def test_text_lab_is_a_text_env_and_numeric_lab_a_box() -> None:
    reactor = labtwin.make("BatchReactor-v1")
    assert isinstance(reactor.action_space, gym.spaces.Box)
    protocol = labtwin.make("ReactorProtocol-v1")
    assert isinstance(protocol.action_space, gym.spaces.Text)
    assert protocol.unwrapped.task.numeric_view is None


class FieldNamedAnswer(labtwin.Experiment):
    answer: float = labtwin.knob(
        0.0, 1.0, unit="", description="a knob that happens to be named answer"
    )


class AnswerFieldLab(type(labtwin.load_task("ArrheniusFit-v1"))):
    """A lab whose experiment has a field named ``answer`` (impossible with in-band answers)."""

    id = "AnswerFieldLab-v0"
    experiment_model = FieldNamedAnswer

    def simulate(self, experiments, conditions, rngs):
        runs = [{"temperature_K": 300 + 80 * e.answer, "time_min": 10.0} for e in experiments]
        return super().simulate(
            [type(labtwin.load_task("ArrheniusFit-v1")).experiment_model(**r) for r in runs],
            conditions,
            rngs,
        )


def test_a_field_named_answer_is_an_experiment_and_answers_are_typed() -> None:
    env = labtwin.LabEnv(AnswerFieldLab(budget=3))
    env.reset(seed=0)
    _, _, terminated, _, info = env.step({"answer": 0.5})
    assert info["kind"] == "experiment" and info["status"] == "ok" and not terminated
    _, reward, terminated, _, info = env.step(labtwin.Answer({"activation_energy_kJ_mol": 70}))
    assert info["kind"] == "answer" and terminated and reward > 0


def test_turn_cap_ends_a_campaign_of_analysis_calls() -> None:
    task = labtwin.load_task("LJEquationOfState-v2", budget=3)
    batch = labtwin.CampaignBatch(task, 1)
    batch.reset([0], [0])
    call = labtwin.Analysis("fit_isotherm", {"temperature": 2.0, "target_pressure": 1.0})
    for _ in range(1000):
        if batch.campaigns[0].done:
            break
        (record,) = batch.step([0], [call])
        assert record.kind == "analysis" and record.score is None and record.reward == 0.0
    campaign = batch.campaigns[0]
    assert campaign.done and len(campaign.history) == task.max_turns == 6
    assert campaign.remaining == 3 and "turn cap" in campaign.end_reason
    with pytest.raises(RuntimeError, match="finished campaign"):
        batch.step([0], [call])


def test_a_text_lab_can_offer_a_numeric_view_of_its_own() -> None:
    """ReactorProtocol-v1 with one fixed stage: feed and catalyst become a Box view."""
    Protocol = type(labtwin.load_task("ReactorProtocol-v1"))
    stage = [{"temperature_K": 340.0, "time_min": 30.0}]

    class OneStage(Protocol):
        def make_numeric_view(self):
            return labtwin.NumericView(self.experiment_model, fixed={"steps": stage})

    env = labtwin.LabEnv(OneStage(budget=2))
    assert env.action_space.shape == (2,)
    env.reset(seed=0)
    _, _, _, _, info = env.step(np.array([0.0, 1.0], dtype=np.float32))
    assert info["status"] == "ok"
    assert info["measurement"].experiment["steps"] == stage
    assert info["measurement"].experiment["catalyst_mol_pct"] == pytest.approx(5.0)
