"""``LabEnv``: one campaign of a lab as a Gymnasium environment (a campaign batch of one).

- action: a vector in ``[-1, 1]^d`` for labs with a numeric view, otherwise the
  experiment as JSON text (``gymnasium.spaces.Text``); ``action_view="text"``
  gives any lab the text view. ``step`` also takes an
  experiment as a dict, a pydantic model or JSON text, an
  :class:`~labtwin.experiment.Answer` for labs with a final answer, and an
  :class:`~labtwin.experiment.Analysis` call; that is how text agents use the
  same environment.
- observation: the campaign so far as a ``(1 + budget, width)`` array whose
  first row holds what the campaign states (see :func:`labtwin.campaign.observation`).
- reward: by default the improvement of the best score so far, so a
  campaign's return is the best score it found.
- ``info["measurement"]``: the full :class:`~labtwin.measurement.Measurement`;
  the step's :class:`~labtwin.campaign.Record` is ``env.campaign.history[-1]``
  (not in ``info``: its campaign id counts resets, and Gymnasium asks that the
  same seed gives the same info).
"""

from __future__ import annotations

from typing import Any, Literal

import gymnasium as gym
import numpy as np

from labtwin.campaign import Campaign, CampaignBatch, Record, RewardMode, observation_space
from labtwin.experiment import text_action_space
from labtwin.task import Task

RENDER_MODES = (None, "rgb_array")
ActionView = Literal["auto", "numeric", "text"]


def check_render_mode(render_mode: str | None) -> None:
    if render_mode not in RENDER_MODES:
        raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")


def action_space(task: Task, view: ActionView) -> gym.Space:
    """``auto``: the numeric view where the lab has one, else text; ``text``: the
    experiment as JSON text for any lab (what an LLM sends); ``numeric``: the Box view."""
    if view == "text":
        return text_action_space()
    if view == "numeric" and task.numeric_view is None:
        raise ValueError(f"{task.id} has no numeric view; use action_view='text'")
    if view not in ("auto", "numeric"):
        raise ValueError(f"action_view must be 'auto', 'numeric' or 'text', got {view!r}")
    return task.action_space


class LabEnv(gym.Env):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 4}

    def __init__(
        self,
        task: Task,
        render_mode: str | None = None,
        reward_mode: RewardMode = "improvement",
        invalid_penalty: float = 0.0,
        max_turns: int | None = None,
        action_view: ActionView = "auto",
        recorder: Any = None,
    ) -> None:
        check_render_mode(render_mode)
        self.task = task
        self.render_mode = render_mode
        self.batch = CampaignBatch(task, 1, reward_mode, invalid_penalty, max_turns, recorder)
        self.action_space = action_space(task, action_view)
        self.observation_space = observation_space(task)

    @property
    def campaign(self) -> Campaign | None:
        return self.batch.campaigns[0]

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        (campaign,) = self.batch.reset([0], [seed])
        return self.batch.observation(0), reset_info(campaign)

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self.campaign is None:
            raise RuntimeError("call reset() before step()")
        (record,) = self.batch.step([0], [action])
        campaign = self.campaign
        info = step_info(campaign, record)
        return self.batch.observation(0), float(record.reward), campaign.done, False, info

    def render(self) -> np.ndarray | None:
        if self.render_mode != "rgb_array":
            return None
        return self.batch.frame(0)


def reset_info(campaign: Campaign) -> dict[str, Any]:
    """The ``info`` dict of a reset."""
    return {"experiments_done": 0, "campaign_seed": campaign.seed}


def step_info(campaign: Campaign, record: Record) -> dict[str, Any]:
    """The ``info`` dict of one step; a campaign's last step adds ``confirmed_score`` where
    the lab confirmed its best experiment."""
    info = {
        "kind": record.kind,
        "measurement": record.measurement,
        "status": record.measurement.status,
        "score": float(record.score) if record.score is not None else float("nan"),
        "best_score": float(campaign.best_score),
        "experiments_done": campaign.experiments,
        "end_reason": campaign.end_reason,
    }
    if record.confirmed_score is not None:
        info["confirmed_score"] = float(record.confirmed_score)
    return info
