"""Figures of an evaluation (matplotlib ``Figure`` objects, no display needed)."""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.figure import Figure

from labtwin.agents.evaluation.compute_fit import ComputeFit

#: baselines keep one colour each, so that figures of different evaluations agree; policies
#: are solid lines in the order they were evaluated
BASELINE_COLOURS = {"random": "C0", "cmaes": "C2", "bo": "C4"}
POLICY_COLOURS = ("C7", "C1", "C3", "C5", "C6", "C8", "C9")


def _styles(agents: list[tuple[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    out, policies = {}, 0
    for name, agent in agents:
        if agent.get("kind") == "baseline":
            out[name] = {"color": BASELINE_COLOURS.get(name, "C9"), "linestyle": "--"}
        else:
            out[name] = {"color": POLICY_COLOURS[policies % len(POLICY_COLOURS)], "linestyle": "-"}
            policies += 1
    return out


def _evaluated(summary: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(n, a) for n, a in summary["agents"].items() if "pass_at_k" in a]


def _title(summary: dict[str, Any]) -> str:
    return (
        f"{summary['task']} · budget {summary['budget']} · "
        f"{summary['campaigns']} campaigns x {summary['samples']} samples"
    )


def plot_pass_at_k(summary: dict[str, Any]) -> Figure:
    """pass@k (left) and pass^k (right) against k, one line per agent, with the standard
    error over campaigns as a band."""
    fig = Figure(figsize=(10, 4.2), dpi=100)
    axes = fig.subplots(1, 2)
    styles = _styles(_evaluated(summary))
    for name, agent in _evaluated(summary):
        for ax, key in zip(axes, ("pass_at_k", "pass_hat_k")):
            k = np.array(agent[key]["k"])
            mean, sem = np.array(agent[key]["mean"]), np.array(agent[key]["sem"])
            style = styles[name]
            ax.plot(k, mean, label=name, lw=2, **style)
            ax.fill_between(k, mean - sem, mean + sem, color=style["color"], alpha=0.15, lw=0)
    for ax, label in zip(axes, ("pass@k (any of k succeeds)", "pass^k (all k succeed)")):
        ax.set_xscale("log", base=2)
        ax.set(xlabel="k (campaigns sampled)", ylabel=label, ylim=(-0.02, 1.02))
        ax.grid(alpha=0.3)
    axes[0].legend(loc="upper left", fontsize=8)
    fig.suptitle(_title(summary), fontsize=10)
    fig.tight_layout()
    return fig


def plot_efficiency(summary: dict[str, Any]) -> Figure:
    """Mean best score against experiments spent (left) and against cost (right)."""
    fig = Figure(figsize=(10, 4.2), dpi=100)
    left, right = fig.subplots(1, 2)
    styles = _styles(_evaluated(summary))
    for name, agent in _evaluated(summary):
        style = styles[name]
        curve = agent["experiments_curve"]
        x, y = np.array(curve["experiments"]), np.array(curve["best_mean"])
        sem = np.array(curve["best_sem"])
        left.plot(x, y, marker="o", ms=3, lw=2, label=f"{name} (area {curve['area']:.3f})", **style)
        left.fill_between(x, y - sem, y + sem, color=style["color"], alpha=0.15, lw=0)
        cost = agent["cost_curve"]
        right.step(
            cost["cost"],
            cost["best_mean"],
            where="post",
            lw=2,
            label=f"{name} (area {cost['area']:.3f})",
            **style,
        )
    from matplotlib.ticker import MaxNLocator

    left.xaxis.set_major_locator(MaxNLocator(integer=True))
    unit = summary.get("cost_unit") or "cost units"
    left.set(xlabel="experiments spent", ylabel="mean best score so far")
    right.set(xlabel=f"cost spent [{unit}]", ylabel="mean best score so far")
    for ax in (left, right):
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)
    fig.suptitle(_title(summary), fontsize=10)
    fig.tight_layout()
    return fig


def plot_compute_fit(
    compute: np.ndarray,
    reward: np.ndarray,
    sigma: np.ndarray | None,
    fit: ComputeFit | None,
    xlabel: str,
    ylabel: str,
    title: str = "",
) -> Figure:
    """Rewards at checkpoints against cumulative compute, and the fitted curve with its
    ceiling ``A`` and ``C_mid`` marked (log compute axis; a point at C = 0 sits at the left
    edge)."""
    fig = Figure(figsize=(7, 4.5), dpi=100)
    ax = fig.add_subplot()
    compute = np.asarray(compute, dtype=float)
    positive = compute[compute > 0]
    left_edge = positive.min() / 3 if positive.size else 1.0
    shown = np.where(compute > 0, compute, left_edge)
    ax.errorbar(shown, reward, yerr=sigma, fmt="o", color="C0", capsize=2, label="evaluations")
    if fit is not None:
        grid = np.logspace(np.log10(left_edge), np.log10(max(positive.max(), fit.C_mid) * 3), 200)
        ax.plot(grid, fit.predict(grid), color="C3", lw=2, label="fit")
        ax.axhline(fit.A, color="C3", ls=":", lw=1)
        ax.axvline(fit.C_mid, color="0.5", ls=":", lw=1)
        text = (
            f"A = {fit.A:.3f} ± {fit.sigma['A']:.3f}\nB = {fit.B:.2f} ± {fit.sigma['B']:.2f}\n"
            f"C_mid = {fit.C_mid:.3g} (x/÷ {np.exp(fit.sigma['ln_C_mid']):.2f})\n"
            f"R0 = {fit.R0:.3f} ± {fit.sigma['R0']:.3f}"
        )
        ax.text(
            0.02, 0.97, text, transform=ax.transAxes, va="top", fontsize=8, family="monospace",
            bbox={"facecolor": "white", "alpha": 0.85, "linewidth": 0},
        )  # fmt: skip
    ax.set_xscale("log")
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return fig
