"""``VectorLabEnv``: many campaigns of one lab, stepped by one batched simulator call.

Unlike Gymnasium's ``SyncVectorEnv`` this is not a loop over environments:
each ``step`` collects one proposal per campaign and sends all experiments to
the task's ``simulate`` together. Instance ``i`` reset with ``seed + i``
gives exactly what ``LabEnv`` reset with ``seed + i`` gives.

Autoreset follows Gymnasium's next-step mode: the step after a campaign ends
resets it (the action for it is ignored) and returns its first observation.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from labtwin.campaign import Campaign, RewardMode, observation, observation_space, step_campaigns
from labtwin.env import step_info
from labtwin.frames import campaign_frame
from labtwin.task import Task


class VectorLabEnv(VectorEnv):
    metadata = {"render_modes": ["rgb_array"], "autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(
        self,
        task: Task,
        num_envs: int,
        render_mode: str | None = None,
        reward_mode: RewardMode = "improvement",
        invalid_penalty: float = 0.0,
    ) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be at least 1, got {num_envs}")
        self.task = task
        self.num_envs = num_envs
        self.render_mode = render_mode
        self.reward_mode = reward_mode
        self.invalid_penalty = invalid_penalty
        self.single_action_space = task.numeric_view.space
        self.single_observation_space = observation_space(task)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self._rngs: list[np.random.Generator] = [np.random.default_rng() for _ in range(num_envs)]
        self.campaigns: list[Campaign | None] = [None] * num_envs
        self._needs_reset = np.zeros(num_envs, dtype=bool)

    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        if isinstance(seed, int):
            seeds: list[int | None] = [seed + i for i in range(self.num_envs)]
        elif seed is None:
            seeds = [None] * self.num_envs
        else:
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise ValueError(f"expected {self.num_envs} seeds, got {len(seeds)}")
        if seed is not None:
            self._np_random, self._np_random_seed = gym.utils.seeding.np_random(seeds[0])
        for i, s in enumerate(seeds):
            if s is not None or self.campaigns[i] is None:
                self._rngs[i], _ = gym.utils.seeding.np_random(s)
            self.campaigns[i] = Campaign.start(self.task, self._rngs[i])
        self._needs_reset[:] = False
        obs = np.stack([observation(c) for c in self.campaigns])
        return obs, {}

    def step(
        self, actions: Any
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step every campaign; ``actions`` is an array ``(num_envs, d)`` or a list of proposals."""
        if any(c is None for c in self.campaigns):
            raise RuntimeError("call reset() before step()")
        proposals = list(actions)
        if len(proposals) != self.num_envs:
            raise ValueError(f"expected {self.num_envs} actions, got {len(proposals)}")
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminated = np.zeros(self.num_envs, dtype=bool)
        truncated = np.zeros(self.num_envs, dtype=bool)
        infos: dict[str, Any] = {}

        live = [i for i in range(self.num_envs) if not self._needs_reset[i]]
        for i in np.flatnonzero(self._needs_reset):
            self.campaigns[i] = Campaign.start(self.task, self._rngs[i])
        records = step_campaigns(
            [self.campaigns[i] for i in live],
            [proposals[i] for i in live],
            self.reward_mode,
            self.invalid_penalty,
        )
        for i, record in zip(live, records):
            campaign = self.campaigns[i]
            rewards[i] = record.reward
            terminated[i] = campaign.done
            infos = self._add_info(infos, step_info(campaign, record), i)
        self._needs_reset = terminated | truncated
        obs = np.stack([observation(c) for c in self.campaigns])
        return obs, rewards, terminated, truncated, infos

    def render(self) -> tuple[np.ndarray, ...] | None:
        if self.render_mode != "rgb_array":
            return None
        return tuple(
            campaign_frame(
                f"{self.task.id} [{i}]",
                [(r.score, r.measurement.status) for r in c.history],
                self.task.budget,
            )
            for i, c in enumerate(self.campaigns)
            if c is not None
        )
