"""labtwin labs in other trainers: the TRL reward function and the SB3 VecEnv."""

from __future__ import annotations

import doctest
import json

import numpy as np
import pytest
import torch

import labtwin
from labtwin.agents import interop
from labtwin.agents.interop import SB3VecEnv, lab_prompt, lab_reward_function
from labtwin.campaign import CampaignBatch, derive_seeds
from labtwin.tools import PROPOSE, format_tool_call

TASK = "BatchReactor-v1"


@pytest.fixture(scope="module")
def task() -> labtwin.Task:
    return labtwin.load_task(TASK)


def random_experiments(task: labtwin.Task, n: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    shape = task.numeric_view.space.shape
    return [
        task.numeric_view.to_experiment(rng.uniform(-1, 1, shape)).model_dump() for _ in range(n)
    ]


def count_simulator_calls(task: labtwin.Task, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Wrap ``task.simulate``; the returned list grows by the batch size at each call."""
    calls: list[int] = []
    simulate = task.simulate

    def counted(experiments, conditions, rngs):
        calls.append(len(experiments))
        return simulate(experiments, conditions, rngs)

    monkeypatch.setattr(task, "simulate", counted)
    return calls


# ---- TRL reward function ---------------------------------------------------------------


def test_doctests() -> None:
    assert doctest.testmod(interop).failed == 0


def test_reward_equals_task_measure_in_one_simulator_call(task, monkeypatch) -> None:
    experiments = random_experiments(task, 5)
    completions = [format_tool_call(PROPOSE, e) for e in experiments]
    nominal = task.nominal_conditions()

    def one_at_a_time(call: int) -> list[float]:
        """Completion i of call k: its own one-slot campaign seeded derive_seeds(3, n, k)[i]."""
        out = []
        for experiment, seed in zip(experiments, derive_seeds(3, len(experiments), call)):
            batch = CampaignBatch(task, 1, "score")
            batch.reset([0], [seed], [nominal])
            out.append(batch.step([0], [experiment])[0].score)
        return out

    expected, expected_next = one_at_a_time(0), one_at_a_time(1)

    calls = count_simulator_calls(task, monkeypatch)
    reward = lab_reward_function(task, seed=3)
    # exact: same experiments, same seeds, same float64 kinetics
    assert reward(completions) == expected
    assert calls == [5]
    assert reward(completions) == expected_next  # each call draws fresh, reproducible noise
    assert all(m.ok for m in reward.last_measurements)


def test_conversational_completions_score_like_strings(task) -> None:
    experiments = random_experiments(task, 3, seed=1)
    as_text = [format_tool_call(PROPOSE, e) for e in experiments]
    expected = lab_reward_function(task, seed=0)(as_text)

    def parsed_call(arguments):  # what TRL gives when the tokenizer parses tool calls
        call = {"type": "function", "function": {"name": PROPOSE, "arguments": arguments}}
        return [{"role": "assistant", "content": "", "tool_calls": [call]}]

    conversational = [
        [{"role": "assistant", "content": as_text[0]}],
        parsed_call(experiments[1]),
        parsed_call(json.dumps(experiments[2])),  # arguments serialised as a string
    ]
    assert lab_reward_function(task, seed=0)(conversational) == expected


def test_malformed_completions_score_the_penalty(task, monkeypatch) -> None:
    good = format_tool_call(PROPOSE, random_experiments(task, 1)[0])
    bad_arguments = {
        "temperature_K": 900,
        "time_min": 10,
        "feed_conc_mol_L": 1,
        "catalyst_mol_pct": 1,
    }
    malformed = [
        "The best temperature is 340 K.",
        "",
        '<tool_call>{"name": "propose_experiment", "arguments": {"temperature_K": 3',
        format_tool_call("submit_answer", {"activation_energy_kJ_mol": 50}),
        format_tool_call(PROPOSE, bad_arguments),
        format_tool_call(PROPOSE, {**random_experiments(task, 1)[0], "stirring_rpm": 300}),
        [{"role": "assistant", "content": None}],
        [{"role": "assistant", "content": [{"type": "text", "text": "no call"}]}],
        [
            {
                "role": "assistant",
                "tool_calls": [{"function": {"name": PROPOSE, "arguments": '{"temp'}}],
            }
        ],
    ]
    calls = count_simulator_calls(task, monkeypatch)
    reward = lab_reward_function(task, seed=0, invalid_penalty=0.25)
    scores = reward([good, *malformed])
    assert calls == [1]  # only the valid proposal reaches the simulator
    assert scores[0] > 0 and reward.last_measurements[0].ok
    assert scores[1:] == [task.invalid_score - 0.25] * len(malformed)
    reasons = [m.reason for m in reward.last_measurements[1:]]
    assert all(m.status == "invalid" for m in reward.last_measurements[1:])
    assert "no tool call found" in reasons[0]
    assert "not valid JSON" in reasons[2]
    assert "unknown tool 'submit_answer'" in reasons[3]
    assert "less than or equal to 380" in reasons[4]
    assert "stirring_rpm: unknown field" in reasons[5]
    assert "malformed JSON" in reasons[8]

    skip = lab_reward_function(task, seed=0, invalid_penalty=None)
    assert skip(["no call here", good])[0] is None


def test_reward_logs_the_valid_fraction_to_trl(task) -> None:
    logged = {}
    reward = lab_reward_function(task)
    good = format_tool_call(PROPOSE, random_experiments(task, 1)[0])
    reward([good, "nothing"], prompts=["p", "p"], log_metric=logged.__setitem__)
    assert logged == {f"labtwin_{task.id}/valid_fraction": 0.5}


def test_lab_prompt_holds_brief_and_schema(task) -> None:
    system, user = lab_prompt(task)
    assert task.brief.strip() in system["content"] and "catalyst_mol_pct" in system["content"]
    assert user["role"] == "user"


# ---- Stable-Baselines3 VecEnv ----------------------------------------------------------


def test_sb3_vec_env_matches_vector_lab_env() -> None:
    """Same campaigns as VectorLabEnv; SB3 autoresets in the same step, Gymnasium a step later."""
    pytest.importorskip("stable_baselines3")
    n, budget = 3, 2
    sb3 = SB3VecEnv(TASK, n, budget=budget)
    sb3.seed(7)
    vec = labtwin.make_vec(TASK, n, budget=budget)
    obs_sb3 = sb3.reset()
    obs_vec, _ = vec.reset(seed=7)
    np.testing.assert_array_equal(obs_sb3, obs_vec)

    actions = np.random.default_rng(0).uniform(-1, 1, (budget, n, 4)).astype(np.float32)
    for k in range(budget):
        obs_sb3, rew_sb3, done, infos = sb3.step(actions[k])
        obs_vec, rew_vec, terminated, truncated, _ = vec.step(actions[k])
        # rewards: float32 in SB3, float64 in labtwin
        np.testing.assert_allclose(rew_sb3, rew_vec, rtol=1e-6)
        np.testing.assert_array_equal(done, terminated | truncated)
    assert done.all()  # every campaign ends exactly at its budget
    for i in range(n):
        np.testing.assert_array_equal(infos[i]["terminal_observation"], obs_vec[i])
        assert infos[i]["TimeLimit.truncated"] is False
        assert infos[i]["experiments_done"] == budget
    assert not obs_sb3[:, 1:, 0].any()  # already reset: no experiment done yet
    obs_vec, *_ = vec.step(actions[0])  # Gymnasium's next-step autoreset (action ignored)
    np.testing.assert_array_equal(obs_sb3, obs_vec)


def test_sb3_ppo_learns_briefly_and_campaigns_end_at_the_budget() -> None:
    pytest.importorskip("stable_baselines3")
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_checker import check_env
    from stable_baselines3.common.vec_env import VecMonitor

    check_env(labtwin.make(f"labtwin/{TASK}", budget=2))
    budget = 3
    env = VecMonitor(SB3VecEnv(TASK, 4, budget=budget))
    model = PPO("MlpPolicy", env, n_steps=3, batch_size=12, n_epochs=1, seed=0, device="cpu")
    before = [p.detach().clone() for p in model.policy.parameters()]
    model.learn(total_timesteps=24)
    episodes = list(model.ep_info_buffer)
    assert len(episodes) == 8 and all(e["l"] == budget for e in episodes)
    assert all(0.0 <= e["r"] <= 1.5 for e in episodes)  # return = best yield, 0..1 plus noise
    after = list(model.policy.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(before, after))


# ---- TRL GRPOTrainer -------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::FutureWarning")  # transformers 5 renames in TRL
def test_trl_grpo_trainer_runs_with_a_lab_reward(tmp_path, task) -> None:
    pytest.importorskip("trl")
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from labtwin.agents.policy import save_tiny

    path = save_tiny(tmp_path / "tiny")
    reward = lab_reward_function(task, seed=0)
    config = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        use_cpu=True,
        report_to="none",
        save_strategy="no",
        max_steps=1,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=8,
        beta=0.0,
        logging_steps=1,
        disable_tqdm=True,
    )
    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(path, local_files_only=True),
        reward_funcs=reward,
        args=config,
        train_dataset=Dataset.from_list([{"prompt": lab_prompt(task)}] * 4),
        processing_class=AutoTokenizer.from_pretrained(path, local_files_only=True),
    )
    trainer.train()
    assert reward.calls == 1 and len(reward.last_measurements) == 4
    logged = next(log for log in trainer.state.log_history if "reward" in log)
    # an untrained model writes no valid call in 8 tokens: every completion gets the penalty
    assert logged[f"rewards/{reward.__name__}/mean"] == pytest.approx(task.invalid_score - 0.1)


def test_hostile_completions_score_the_penalty_and_never_raise(task) -> None:
    """Hypothesis-drawn completions (text, message lists, tool calls with hostile arguments)
    through the TRL reward function: one score per completion, valid ones unaffected."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from labtwin.testing import hostile_strategy

    good = format_tool_call(PROPOSE, random_experiments(task, 1)[0])
    reward = lab_reward_function(task, seed=0)
    (alone,) = lab_reward_function(task, seed=0)([good])

    def as_completion(p):
        if isinstance(p, (dict, list)):
            try:
                return [
                    {
                        "role": "assistant",
                        "content": "",
                        "tool_calls": [{"function": {"name": PROPOSE, "arguments": json.dumps(p)}}],
                    }
                ]
            except (ValueError, TypeError):
                return "unprintable"
        return p if isinstance(p, str) else "not text"

    @settings(
        max_examples=25,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.lists(hostile_strategy(task).map(as_completion), min_size=1, max_size=3))
    def score(completions):
        scores = reward([good, *completions])
        assert len(scores) == len(completions) + 1
        assert all(s is not None and np.isfinite(s) for s in scores)
        assert all(len(m.reason) <= 2000 for m in reward.last_measurements)

    score()
    assert np.isfinite(alone)
