"""Plots of recorded runs (matplotlib, no display needed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from labtwin.runs import Run


def best_so_far(run: Run) -> dict[int, np.ndarray]:
    """Per campaign, the best score after each experiment (in step order)."""
    scores: dict[int, list[tuple[int, float]]] = {}
    for r in run.records:
        if r.kind == "experiment":
            scores.setdefault(r.campaign, []).append((r.step, r.score))
    return {c: np.maximum.accumulate([s for _, s in sorted(v)]) for c, v in scores.items()}


def plot_campaigns(run: Run) -> Figure:
    """Best score so far against experiments spent, one line per campaign and their mean."""
    fig = Figure(figsize=(7, 4.5), dpi=100)
    ax = fig.add_subplot()
    curves = best_so_far(run)
    for _c, curve in sorted(curves.items()):
        ax.plot(np.arange(1, len(curve) + 1), curve, color="0.7", lw=1, label=None)
    if curves:
        length = min(len(c) for c in curves.values())
        mean = np.mean([c[:length] for c in curves.values()], axis=0)
        ax.plot(np.arange(1, length + 1), mean, color="C0", lw=2.5, label="mean of campaigns")
        ax.legend(loc="lower right")
    title = f"{run.config.get('task', '?')} · {run.config.get('agent', '')}"
    ax.set(title=title, xlabel="experiments", ylabel="best score so far")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def plot_time_course(run: Run, campaign: int, step: int) -> Figure:
    """Concentration-time course of one recorded reactor run (``time_course`` artifact)."""
    line = next(r for r in run.record_lines if r["campaign"] == campaign and r["step"] == step)
    course = run.artifact(line["measurement"]["artifacts"]["time_course"])
    fig = Figure(figsize=(6, 4), dpi=100)
    ax = fig.add_subplot()
    for j, name in enumerate("ABCD"[: course.shape[1] - 1]):
        ax.plot(course[:, 0], course[:, j + 1], label=name)
    ax.set(
        xlabel="time [min]",
        ylabel="concentration [mol/L]",
        title=f"campaign {campaign}, experiment {step + 1}",
    )
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def save_campaign_plot(run: Run, path: str | Path | None = None) -> Path:
    """Write :func:`plot_campaigns` as a PNG (default ``<run>/campaigns.png``)."""
    path = Path(path) if path else run.path / "campaigns.png"
    plot_campaigns(run).savefig(path)
    return path


def plot_training(run: Run) -> Figure:
    """GRPO reward per step, with the evaluations before and after training."""
    train = [m for m in run.metrics if m.get("phase") == "train"]
    evals = {m["phase"]: m for m in run.metrics if str(m.get("phase", "")).startswith("eval_")}
    fig = Figure(figsize=(7, 4.5), dpi=100)
    ax = fig.add_subplot()
    if train:
        steps = np.array([m["step"] for m in train])
        mean = np.array([m["reward_mean"] for m in train])
        std = np.array([m["reward_std"] for m in train])
        ax.plot(steps, mean, color="C0", label="training campaigns (mean)")
        ax.fill_between(steps, mean - std, mean + std, color="C0", alpha=0.15)
    labels = {
        "eval_untrained": "untrained",
        "eval_warm_start": "after warm start",
        "eval_trained": "after GRPO",
    }
    for k, (phase, label) in enumerate(labels.items()):
        if phase in evals:
            ax.axhline(
                evals[phase]["eval_reward_mean"],
                color=f"C{k + 1}",
                ls="--",
                label=f"eval {label}: {evals[phase]['eval_reward_mean']:.3f}",
            )
    ax.set(
        title=f"GRPO on {run.config.get('task', '?')}", xlabel="GRPO step", ylabel="campaign reward"
    )
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig
