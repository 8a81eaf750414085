"""Rollouts of tool-calling campaigns and the GRPO trainer, with the tiny model."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import labtwin
from labtwin.agents.rollout import run_episodes
from labtwin.agents.train import TrainConfig, grpo_update, make_policy, random_reply, train
from labtwin.tools import format_tool_call

RUN = {"temperature_K": 330, "time_min": 40, "feed_conc_mol_L": 0.2, "catalyst_mol_pct": 3}


@pytest.fixture(scope="module")
def policy():
    return make_policy(TrainConfig(budget=2))


def test_token_masks_separate_model_and_environment(policy) -> None:
    task = labtwin.load_task("BatchReactor-v1", budget=2)
    replies = [format_tool_call("propose_experiment", RUN), "I am not sure."]

    def script(live, env):
        return [replies[len(env.conversations[i].campaign.history)] for i in live]

    (episode,), _ = run_episodes(policy, task, [3], 1, invalid_penalty=0.25, replies=script)
    ids, mask = np.array(episode.completion_ids), np.array(episode.completion_mask)
    decode = policy.tokenizer.decode
    model_text = decode(ids[mask == 1].tolist())
    env_text = decode(ids[mask == 0].tolist())
    assert "propose_experiment" in model_text and "I am not sure." in model_text
    assert "yield_B" in env_text and "propose_experiment" not in env_text
    assert len(episode.old_logprobs) == len(ids)
    # second reply had no tool call: invalid, penalised, and the rollout went on to the end
    statuses = [m.status for m in episode.measurements]
    assert statuses == ["ok", "invalid"]
    # the campaign earns the lower of its best yield and the closing confirmation's
    confirmed = episode.records[-1].confirmed_score
    assert confirmed is not None and episode.records[-1].confirmation.ok
    earned = min(episode.measurements[0]["yield_B"], confirmed)
    assert episode.reward == pytest.approx(earned - 0.25)
    # the conversation as text round-trips through the chat template
    assert (
        episode.messages[-1]["role"] == "tool"
        and "no tool call found" in episode.messages[-1]["content"]
    )


def test_free_text_model_output_never_crashes_a_rollout(policy) -> None:
    """An untrained model without constraints writes garbage: every call is invalid."""
    task = labtwin.load_task("BatchReactor-v1", budget=2)
    episodes, timing = run_episodes(policy, task, [0, 1], 2, max_new_tokens=24, seed=0)
    assert len(episodes) == 4 and all(e.turns == 2 for e in episodes)
    assert all(m.status == "invalid" for e in episodes for m in e.measurements)
    assert all(e.reward == pytest.approx(-0.2) for e in episodes)
    assert timing.tokens_generated > 0


def test_grpo_update_changes_parameters(policy) -> None:
    task = labtwin.load_task("BatchReactor-v1", budget=1)
    rng = np.random.default_rng(0)

    def script(live, env):
        return [random_reply(task, rng, submit=False) for _ in live]

    episodes, _ = run_episodes(policy, task, [0, 1], 4, replies=script)
    # scripted replies carry log-prob 0: recompute them as the sampling policy would
    with torch.no_grad():
        out = policy.logprobs(
            [e.prompt_ids for e in episodes], [e.completion_ids for e in episodes]
        )
    for e, row in zip(episodes, out.logprobs):
        e.old_logprobs = row[: len(e.completion_ids)].tolist()
    rewards = torch.tensor([e.reward for e in episodes])
    advantages = rewards - rewards.view(2, 4).mean(1).repeat_interleave(4)
    before = [p.detach().clone() for p in policy.model.parameters()]
    optimizer = torch.optim.AdamW(policy.model.parameters(), lr=1e-3)
    metrics = grpo_update(
        policy, None, optimizer, episodes, advantages, TrainConfig(micro_batch_size=3)
    )
    changed = [not torch.equal(b, p) for b, p in zip(before, policy.model.parameters())]
    assert all(changed)
    assert metrics["ratio_mean"] == pytest.approx(1.0, abs=1e-4)  # on-policy first update


def _small(tmp_path, steps: int, resume: bool = False, **changes) -> TrainConfig:
    return TrainConfig(
        steps=steps,
        campaigns_per_step=2,
        group_size=4,
        budget=1,
        eval_campaigns=4,
        warmstart_steps=3,
        warmstart_batch=4,
        max_new_tokens=72,
        checkpoint_every=1,
        out=str(tmp_path),
        resume=resume,
        progress=False,
        learning_rate=3e-3,
        **changes,
    )


def test_resume_continues_the_same_run(tmp_path) -> None:
    """3 steps straight equal 2 steps, a stop, and a resume to 3: same weights, same records.

    With a KL term, so the resumed run must find the same frozen reference (the policy
    after the warm start, saved with the run), not the checkpoint it resumes from."""
    straight = train(_small(tmp_path / "a", 3, kl_coef=0.05))
    train(_small(tmp_path / "b", 2, kl_coef=0.05))
    resumed = train(_small(tmp_path / "b", 3, resume=True, kl_coef=0.05))
    a = labtwin.runs.load(straight.run_dir)
    b = labtwin.runs.load(resumed.run_dir)
    a_train = [m["reward_mean"] for m in a.metrics if m["phase"] == "train"]
    b_train = [m["reward_mean"] for m in b.metrics if m["phase"] == "train"]
    assert a_train == b_train and len(a_train) == 3
    weights_a = torch.load(
        straight.run_dir / "checkpoints" / "step_000003" / "trainer.pt", weights_only=True
    )["step"]
    assert weights_a == 3
    from safetensors.torch import load_file

    wa = load_file(straight.run_dir / "checkpoints" / "step_000003" / "model.safetensors")
    wb = load_file(resumed.run_dir / "checkpoints" / "step_000003" / "model.safetensors")
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    assert json.loads((resumed.run_dir / "summary.json").read_text())["eval_trained"]
    assert [m["kl"] for m in a.metrics if "kl" in m] == [m["kl"] for m in b.metrics if "kl" in m]
    # every training campaign and record is in the run store, the resumed part too
    assert len(b.records) == 3 * 2 * 4 and sorted(b.campaigns) == list(range(3 * 2 * 4))
    assert [r.to_dict() for r in a.records] == [r.to_dict() for r in b.records]
    with pytest.raises(FileNotFoundError, match="nothing to resume"):
        train(_small(tmp_path / "c", 1, resume=True))


def test_constrained_sampling_keeps_unconstrained_logprobs(policy) -> None:
    """With the grammar on, every call is valid and the stored sampling log-probs
    equal the training forward pass (so the first GRPO ratio is 1); float32, 1e-4.

    160 new tokens leave room for a whole call: a reply cut off at the token limit
    is the one way a grammar-constrained call can still be invalid."""
    from labtwin.agents.train import make_grammar

    task = labtwin.load_task("BatchReactor-v1", budget=2)
    grammar = make_grammar(policy, task, TrainConfig(budget=2))
    episodes, _ = run_episodes(
        policy, task, [0], 3, max_new_tokens=160, logits_processor=grammar, seed=1
    )
    with torch.no_grad():
        out = policy.logprobs(
            [e.prompt_ids for e in episodes], [e.completion_ids for e in episodes]
        )
    for e, row in zip(episodes, out.logprobs):
        mask = np.array(e.completion_mask, dtype=bool)
        np.testing.assert_allclose(
            np.array(e.old_logprobs)[mask], row[: len(mask)].numpy()[mask], atol=1e-4
        )
        assert all(
            m.status != "invalid" or "less than" in m.reason or "greater than" in m.reason
            for m in e.measurements
        )


def test_metrics_also_go_to_tensorboard(tmp_path) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    cfg = _small(tmp_path / "tb", 2)
    cfg.tensorboard, cfg.warmstart_steps, cfg.eval_campaigns = True, 0, 2
    train(cfg)
    events = EventAccumulator(str(tmp_path / "tb" / "tensorboard"))
    events.Reload()
    rewards = events.Scalars("train/reward_mean")
    assert [e.step for e in rewards] == [1, 2]
    run = labtwin.runs.load(tmp_path / "tb")
    assert [m["reward_mean"] for m in run.metrics if m["phase"] == "train"] == pytest.approx(
        [e.value for e in rewards], rel=1e-6
    )


def test_hostile_replies_never_crash_a_rollout(policy) -> None:
    """Hostile reply texts (hand-written and Hypothesis-drawn) through the rollout engine:
    every campaign ends, each bad reply is one invalid step, nothing raises."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from labtwin.testing import hostile_text_strategy

    task = labtwin.load_task("BatchReactor-v1", budget=2)
    fixed = [
        " " * 100_000 + "<tool_call>",  # was quadratic in the tool-call pattern
        "<tool_call>" + "[" * 50_000 + "</tool_call>",
        '<tool_call>{"name": "propose_experiment", "arguments": {"temperature_K": '
        + "9" * 5000
        + "}}</tool_call>",
        '<tool_call>{"name": "submit_answer", "arguments": {}}</tool_call>',
        '<tool_call>{"name": "fit_isotherm", "arguments": 3}</tool_call>',
    ]
    texts = hostile_text_strategy(task)

    @settings(
        max_examples=8,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.lists(texts, min_size=2, max_size=2))
    def rollout(drawn):
        replies = iter(fixed + drawn + fixed)

        def script(live, env):
            return [next(replies, "nothing") for _ in live]

        episodes, _ = run_episodes(policy, task, [0, 1], 2, replies=script)
        assert all(e.turns >= 1 and len(e.records) == e.turns for e in episodes)
        assert all(
            r.measurement.status in ("ok", "invalid", "failed") for e in episodes for r in e.records
        )

    rollout()
