"""``VectorLabEnv``: many campaigns of one lab, stepped by one batched simulator call.

Unlike Gymnasium's ``SyncVectorEnv`` this is not a loop over environments:
it is a :class:`~labtwin.campaign.CampaignBatch` with one slot per instance,
so each ``step`` sends every campaign's experiment to the lab's simulator
together. Instance ``i`` reset with ``seed + i`` gives exactly what ``LabEnv``
reset with ``seed + i`` gives.

Autoreset follows Gymnasium's ``autoreset_mode``:

- ``NEXT_STEP`` (default): the step after a campaign ends resets it (the
  action for it is ignored) and returns its first observation;
- ``SAME_STEP``: a campaign that ends is reset in the same step; the
  observation returned is the new campaign's first one, and the final
  observation and info are in ``infos["final_obs"]`` and ``infos["final_info"]``
  (masked by ``infos["_final_obs"]``), as Gymnasium's own vector envs do.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from labtwin.campaign import Campaign, CampaignBatch, RewardMode, observation_space
from labtwin.env import ActionView, action_space, check_render_mode, reset_info, step_info
from labtwin.task import Task

AUTORESET_MODES = (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP)


def _autoreset_mode(mode: AutoresetMode | str) -> AutoresetMode:
    """An ``AutoresetMode``, also from its value or name ("SameStep", "same_step")."""
    if isinstance(mode, str):
        key = mode.replace("_", "").lower()
        mode = next(
            (
                m
                for m in AUTORESET_MODES
                if key in (m.value.lower(), m.name.replace("_", "").lower())
            ),
            mode,
        )
    if mode not in AUTORESET_MODES:
        raise ValueError(
            f"autoreset_mode must be one of {[m.value for m in AUTORESET_MODES]}, got {mode!r}"
        )
    return mode


class VectorLabEnv(VectorEnv):
    metadata = {"render_modes": ["rgb_array"], "autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(
        self,
        task: Task,
        num_envs: int,
        render_mode: str | None = None,
        reward_mode: RewardMode = "improvement",
        invalid_penalty: float = 0.0,
        max_turns: int | None = None,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        recorder: Any = None,
        action_view: ActionView = "auto",
    ) -> None:
        check_render_mode(render_mode)
        autoreset_mode = _autoreset_mode(autoreset_mode)
        self.metadata = {**self.metadata, "autoreset_mode": autoreset_mode}
        self.task = task
        self.batch = CampaignBatch(
            task, num_envs, reward_mode, invalid_penalty, max_turns, recorder=recorder
        )
        self.num_envs = num_envs
        self.render_mode = render_mode
        self.autoreset_mode = autoreset_mode
        self.single_action_space = action_space(task, action_view)
        self.single_observation_space = observation_space(task)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self._needs_reset = np.zeros(num_envs, dtype=bool)

    @property
    def campaigns(self) -> list[Campaign | None]:
        return self.batch.campaigns

    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        if isinstance(seed, (int, np.integer)):
            seeds: list[int | None] = [int(seed) + i for i in range(self.num_envs)]
        elif seed is None:
            seeds = [None] * self.num_envs
        else:
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise ValueError(f"expected {self.num_envs} seeds, got {len(seeds)}")
        if seeds[0] is not None:
            super().reset(seed=seeds[0])
        started = self.batch.reset(range(self.num_envs), seeds)
        self._needs_reset[:] = False
        infos: dict[str, Any] = {}
        for i, campaign in enumerate(started):
            infos = self._add_info(infos, reset_info(campaign), i)
        return self._observations(), infos

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

        resetting = np.flatnonzero(self._needs_reset).tolist()
        for i, campaign in zip(resetting, self.batch.reset(resetting)):
            infos = self._add_info(infos, reset_info(campaign), i)
        live = [i for i in range(self.num_envs) if not self._needs_reset[i]]
        records = self.batch.step(live, [proposals[i] for i in live])
        for i, record in zip(live, records):
            campaign = self.campaigns[i]
            rewards[i] = record.reward
            terminated[i] = campaign.done
            infos = self._add_info(infos, step_info(campaign, record), i)
        obs = self._observations()
        ended = np.flatnonzero(terminated | truncated).tolist()
        if self.autoreset_mode == AutoresetMode.SAME_STEP and ended:
            for i in ended:  # Gymnasium's layout: infos["final_obs"], infos["final_info"]
                final = {
                    "final_obs": obs[i].copy(),
                    "final_info": step_info(self.campaigns[i], records[live.index(i)]),
                }
                infos = self._add_info(infos, final, i)
            self.batch.reset(ended)
            obs = self._observations()
        else:
            self._needs_reset = terminated | truncated
        return obs, rewards, terminated, truncated, infos

    def _observations(self) -> np.ndarray:
        return np.stack([self.batch.observation(i) for i in range(self.num_envs)])

    def render(self) -> tuple[np.ndarray, ...] | None:
        if self.render_mode != "rgb_array":
            return None
        return tuple(
            self.batch.frame(i, f"{self.task.id} [{i}]")
            for i, c in enumerate(self.campaigns)
            if c is not None
        )
