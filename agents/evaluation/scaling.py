"""Reward against RL compute of one training run: its evaluations, fitted.

A training run logs an evaluation on its fixed evaluation campaigns before GRPO (after the
warm start, or of the untrained policy without one), every ``eval_every`` GRPO steps
(``eval_checkpoint``) and at the end (``eval_trained``); each line carries the run's
cumulative compute (:class:`~labtwin.agents.train.Compute`). This module takes those points
(the GRPO compute of the first is 0), fits
:func:`~labtwin.agents.evaluation.compute_fit.fit_reward_curve` and writes
``curve.json`` and ``reward_vs_compute.png``.

Error bars of the points: for the mean reward, its standard deviation over campaigns over
the square root of their number; for the success rate ``p`` of ``n`` campaigns,
``sqrt(max(p (1 - p), 1 / (4 n)) / n)`` (the floor keeps a rate of 0 or 1 from claiming no
error). Every point is measured on the same campaigns with the same sampling seed, so the
points differ only by the weights; the fit's uncertainties are those of this set of
campaigns, not of the lab's whole distribution of campaigns.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from labtwin.agents.evaluation.compute_fit import ComputeFit, fit_reward_curve

COMPUTE_AXES = {
    "cpu_s": "GRPO CPU-seconds (generation + simulation + update)",
    "generation_cpu_s": "generation CPU-seconds",
    "tokens_generated": "tokens generated",
    "tokens_trained": "tokens through the update",
    "wall_s": "GRPO wall seconds (generation + simulation + update)",
}
METRICS = {"reward_mean": "mean campaign reward", "success_rate": "success rate"}
#: phases whose lines are evaluations on the run's fixed evaluation campaigns
EVAL_PHASES = ("eval_untrained", "eval_warm_start", "eval_checkpoint", "eval_trained")


@dataclass
class ComputePoints:
    phase: list[str]
    step: list[int]
    compute: np.ndarray
    reward: np.ndarray
    sigma: np.ndarray

    def to_dict(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "step": self.step,
            "compute": self.compute.tolist(),
            "reward": self.reward.tolist(),
            "sigma": self.sigma.tolist(),
        }


def _compute_of(line: dict[str, Any], axis: str) -> float:
    if axis == "wall_s":
        return sum(
            float(line.get(f"compute_{k}", 0.0))
            for k in ("generation_s", "simulation_s", "update_s")
        )
    return float(line.get(f"compute_{axis}", math.nan))


def compute_points(
    metrics: list[dict[str, Any]],
    n_campaigns: int,
    axis: str = "cpu_s",
    metric: str = "reward_mean",
) -> ComputePoints:
    """The run's evaluations as (compute, reward, error) points, in step order. The untrained
    evaluation is left out where a warm start followed it (GRPO started from the warm start)."""
    if axis not in COMPUTE_AXES:
        raise ValueError(f"unknown compute axis {axis!r}; axes: {', '.join(COMPUTE_AXES)}")
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; metrics: {', '.join(METRICS)}")
    latest: dict[tuple[str, int], dict[str, Any]] = {}  # a resumed run's repeats: the last
    for line in metrics:
        if line.get("phase") in EVAL_PHASES:
            latest[(line["phase"], int(line["step"]))] = line
    phases = {phase for phase, _ in latest}
    if "eval_warm_start" in phases:
        latest = {key: line for key, line in latest.items() if key[0] != "eval_untrained"}
    order = sorted(latest, key=lambda key: (key[1], EVAL_PHASES.index(key[0])))
    lines = [latest[key] for key in order]
    needed = (f"eval_{metric}", "compute_generation_s" if axis == "wall_s" else f"compute_{axis}")
    if any(key not in line for line in lines for key in needed):
        raise ValueError(
            f"the run's evaluations carry no {needed[1]} or no {needed[0]} "
            "(a run from before compute was recorded?)"
        )
    reward = np.array([float(line[f"eval_{metric}"]) for line in lines])
    if metric == "reward_mean":
        sigma = np.array([float(line["eval_reward_std"]) for line in lines]) / math.sqrt(
            n_campaigns
        )
        sigma = np.maximum(sigma, 1e-6)
    else:
        sigma = np.sqrt(np.maximum(reward * (1 - reward), 0.25 / n_campaigns) / n_campaigns)
    return ComputePoints(
        phase=[key[0] for key in order],
        step=[key[1] for key in order],
        compute=np.array([_compute_of(line, axis) for line in lines]),
        reward=reward,
        sigma=sigma,
    )


def fit_run(
    run_dir: Path, axis: str = "cpu_s", metric: str = "reward_mean", out: Path | None = None
) -> tuple[ComputePoints, ComputeFit | None, str]:
    """Fit a training run's evaluations; returns the points, the fit (None and the reason
    where it cannot be made) and writes curve.json and reward_vs_compute.png into ``out``
    (default ``<run>/eval``)."""
    from labtwin import runs
    from labtwin.agents.evaluation.plots import plot_compute_fit

    run = runs.load(run_dir)
    if run.config.get("kind") != "train":
        raise ValueError(f"{run_dir} is not a training run (kind {run.config.get('kind')!r})")
    n_campaigns = int(run.config.get("eval_campaigns", 1))
    points = compute_points(run.metrics, n_campaigns, axis, metric)
    try:
        fit, reason = fit_reward_curve(points.compute, points.reward, points.sigma), ""
    except ValueError as err:
        fit, reason = None, str(err)
    out = Path(out) if out is not None else Path(run_dir) / "eval"
    out.mkdir(parents=True, exist_ok=True)
    result = {
        "run": str(run_dir),
        "task": run.config.get("task"),
        "compute": axis,
        "compute_label": COMPUTE_AXES[axis],
        "metric": metric,
        "eval_campaigns": n_campaigns,
        "points": points.to_dict(),
        "fit": fit.to_dict() if fit else None,
        "no_fit": reason,
    }
    (out / "curve.json").write_text(json.dumps(result, indent=2))
    figure = plot_compute_fit(
        points.compute,
        points.reward,
        points.sigma,
        fit,
        COMPUTE_AXES[axis],
        METRICS[metric],
        title=f"{run.config.get('task', '')} · {n_campaigns} evaluation campaigns",
    )
    figure.savefig(out / "reward_vs_compute.png")
    return points, fit, reason
