"""``LabEnv``: one campaign of a lab as a Gymnasium environment.

- action: a vector in ``[-1, 1]^d`` (the task's numeric view). ``step`` also
  takes an experiment as a dict, a pydantic model or JSON text, and
  ``{"answer": ...}`` for labs with a final answer; that is how text agents
  use the same environment.
- observation: the campaign so far as a ``(budget, width)`` array (see
  :func:`labtwin.campaign.observation`).
- reward: by default the improvement of the best score so far, so a
  campaign's return is the best score it found.
- ``info["measurement"]``: the full :class:`~labtwin.measurement.Measurement`.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from labtwin.campaign import Campaign, RewardMode, observation, observation_space, step_campaigns
from labtwin.frames import campaign_frame
from labtwin.task import Task


class LabEnv(gym.Env):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 4}

    def __init__(
        self,
        task: Task,
        render_mode: str | None = None,
        reward_mode: RewardMode = "improvement",
        invalid_penalty: float = 0.0,
    ) -> None:
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        self.task = task
        self.render_mode = render_mode
        self.reward_mode = reward_mode
        self.invalid_penalty = invalid_penalty
        self.action_space = task.numeric_view.space
        self.observation_space = observation_space(task)
        self.campaign: Campaign | None = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.campaign = Campaign.start(self.task, self.np_random)
        return observation(self.campaign), {"experiments_done": 0}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self.campaign is None:
            raise RuntimeError("call reset() before step()")
        (record,) = step_campaigns(
            [self.campaign], [action], self.reward_mode, self.invalid_penalty
        )
        info = step_info(self.campaign, record)
        return observation(self.campaign), float(record.reward), self.campaign.done, False, info

    def render(self) -> np.ndarray | None:
        if self.render_mode != "rgb_array":
            return None
        history = self.campaign.history if self.campaign else []
        return campaign_frame(
            self.task.id, [(r.score, r.measurement.status) for r in history], self.task.budget
        )


def step_info(campaign: Campaign, record: Any) -> dict[str, Any]:
    """The ``info`` dict of one step."""
    return {
        "measurement": record.measurement,
        "status": record.measurement.status,
        "score": float(record.score),
        "best_score": float(campaign.best_score),
        "experiments_done": len(campaign.history),
    }
