"""Campaigns: the state of one episode, and stepping many of them in one call.

Both :class:`~labtwin.env.LabEnv` (a batch of one) and
:class:`~labtwin.vector.VectorLabEnv` keep a list of :class:`Campaign` objects
and advance them with :func:`step_campaigns`, which sends every experiment of
the step to the task's simulator in a single batched call.

Seeding: a campaign owns a ``numpy`` generator seeded at reset. It draws the
campaign's hidden conditions first, then one seed per experiment, so the same
seed gives the same measurements however campaigns are batched.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import gymnasium as gym
import numpy as np

from labtwin.experiment import Invalid
from labtwin.measurement import Measurement
from labtwin.task import Task

RewardMode = Literal["improvement", "score"]


@dataclass
class Record:
    """One step of a campaign."""

    measurement: Measurement
    score: float
    reward: float
    vector: np.ndarray | None  # the experiment in the numeric view, None if invalid
    kind: Literal["experiment", "answer"] = "experiment"


@dataclass
class Campaign:
    """One episode: up to ``task.budget`` experiments, or until an answer is submitted."""

    task: Task
    rng: np.random.Generator
    conditions: dict[str, Any] = field(default_factory=dict)
    history: list[Record] = field(default_factory=list)
    best_score: float = 0.0
    done: bool = False

    @classmethod
    def start(cls, task: Task, rng: np.random.Generator) -> Campaign:
        conditions = task.sample_conditions(rng)
        return cls(task, rng, conditions, best_score=float(task.baseline_score))

    @property
    def cost(self) -> float:
        return float(sum(r.measurement.cost for r in self.history))

    @property
    def remaining(self) -> int:
        return self.task.budget - len(self.history)

    def next_seed(self) -> int:
        return int(self.rng.integers(0, 2**63 - 1))


def is_answer(proposal: Any) -> bool:
    """A proposal of the form ``{"answer": ...}`` submits a final answer."""
    return isinstance(proposal, dict) and set(proposal) == {"answer"}


def step_campaigns(
    campaigns: list[Campaign],
    proposals: list[Any],
    reward_mode: RewardMode = "improvement",
    invalid_penalty: float = 0.0,
) -> list[Record]:
    """Advance each campaign by one proposal; all experiments go to one simulator call.

    Rewards: ``"improvement"`` pays how much the score raised the campaign's
    best so far (a campaign's return is then its best score above the
    baseline); ``"score"`` pays each measurement's score. ``invalid_penalty``
    is subtracted for invalid proposals. A submitted answer pays its score
    and ends the campaign.
    """
    if not campaigns:
        return []
    if any(c.done for c in campaigns):
        raise RuntimeError("step called on a finished campaign; reset it first")
    task = campaigns[0].task
    seeds = [c.next_seed() for c in campaigns]
    experiment_idx = [i for i, p in enumerate(proposals) if not is_answer(p)]
    measured = task.run(
        [proposals[i] for i in experiment_idx],
        [campaigns[i].conditions for i in experiment_idx],
        [seeds[i] for i in experiment_idx],
    )
    by_index = dict(zip(experiment_idx, measured))
    records = []
    for i, (campaign, proposal) in enumerate(zip(campaigns, proposals)):
        if i in by_index:
            record = _experiment_record(campaign, by_index[i], reward_mode)
        else:
            record = _answer_record(campaign, proposal["answer"], seeds[i])
        if record.measurement.status == "invalid":
            record.reward -= invalid_penalty
        campaign.history.append(record)
        campaign.done = record.kind == "answer" and record.measurement.ok
        campaign.done |= campaign.remaining <= 0
        records.append(record)
    return records


def _experiment_record(campaign: Campaign, m: Measurement, reward_mode: RewardMode) -> Record:
    task = campaign.task
    score = task.score(m, campaign.conditions)
    if reward_mode == "improvement":
        reward = max(score - campaign.best_score, 0.0)
    else:
        reward = score
    campaign.best_score = max(campaign.best_score, score)
    vector = None
    if m.experiment is not None:
        vector = task.numeric_view.to_vector(task.experiment_model.model_validate(m.experiment))
    return Record(m, score, reward, vector)


def _answer_record(campaign: Campaign, answer: Any, seed: int) -> Record:
    task = campaign.task
    parsed = task.parse_answer(answer)
    if isinstance(parsed, Invalid):
        m = Measurement.invalid(parsed.reason, answer, task=task.id, seed=seed)
        return Record(m, float(task.invalid_score), 0.0, None, kind="answer")
    history = [r.measurement for r in campaign.history]
    score = float(task.score_answer(parsed, campaign.conditions, history))
    m = Measurement(
        "ok", experiment={"answer": parsed.model_dump()}, provenance={"task": task.id, "seed": seed}
    )
    return Record(m, score, score, None, kind="answer")


OBS_LIMIT = 1e6  # bound on scaled observables and scores in the numeric observation


def observation_width(task: Task) -> int:
    """Columns of one history row: filled, ok, action, observables, score."""
    return 2 + task.numeric_view.space.shape[0] + len(task.observables) + 1


def observation_space(task: Task) -> gym.spaces.Box:
    """Space of :func:`observation`: flags in [0, 1], actions in [-1, 1], values bounded by 1e6."""
    n_act = task.numeric_view.space.shape[0]
    low = np.full((task.budget, observation_width(task)), -OBS_LIMIT, dtype=np.float32)
    high = np.full_like(low, OBS_LIMIT)
    low[:, :2], high[:, :2] = 0.0, 1.0
    low[:, 2 : 2 + n_act], high[:, 2 : 2 + n_act] = -1.0, 1.0
    return gym.spaces.Box(low, high, dtype=np.float32)


def observation(campaign: Campaign) -> np.ndarray:
    """The campaign history as a ``(budget, width)`` float32 array, zero-padded.

    Row k describes experiment k: ``[filled, ok, action..., observable/scale..., score]``.
    """
    task = campaign.task
    n_act = task.numeric_view.space.shape[0]
    obs = np.zeros((task.budget, observation_width(task)), dtype=np.float32)
    for k, record in enumerate(campaign.history[: task.budget]):
        m = record.measurement
        obs[k, 0] = 1.0
        obs[k, 1] = 1.0 if m.ok else 0.0
        if record.vector is not None:
            obs[k, 2 : 2 + n_act] = record.vector
        if m.ok:
            for j, spec in enumerate(task.observables):
                if spec.name in m.observables:
                    obs[k, 2 + n_act + j] = m.observables[spec.name].value / spec.scale
        obs[k, -1] = record.score
    np.clip(obs, -OBS_LIMIT, OBS_LIMIT, out=obs)
    return obs
