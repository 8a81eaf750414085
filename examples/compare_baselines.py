"""Compare the baseline agents on a lab: mean best score after each experiment.

    python examples/compare_baselines.py --task BatchReactor-v1 --campaigns 8
    python examples/compare_baselines.py --smoke      # seconds, as CI runs it

Writes one run per agent under runs/ and a plot of the mean best-so-far curves.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

import labtwin
from labtwin.rendering.plots import best_so_far
from labtwin.runner import run_campaigns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="BatchReactor-v1")
    parser.add_argument("--agents", nargs="+", default=["random", "cmaes", "bo"])
    parser.add_argument("--campaigns", type=int, default=8)
    parser.add_argument("--budget", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("runs/compare"))
    parser.add_argument("--smoke", action="store_true", help="2 campaigns of 4 experiments")
    args = parser.parse_args()
    if args.smoke:
        args.campaigns, args.budget = 2, 4

    fig = Figure(figsize=(7, 4.5))
    ax = fig.add_subplot()
    kwargs = {"budget": args.budget} if args.budget else {}
    for agent in args.agents:
        summaries, path = run_campaigns(
            args.task,
            agent,
            args.campaigns,
            args.seed,
            run_dir=args.out / agent,
            progress=True,
            **kwargs,
        )
        curves = np.array(list(best_so_far(labtwin.runs.load(path)).values()))
        mean = curves.mean(axis=0)
        sem = curves.std(axis=0, ddof=1) / np.sqrt(len(curves)) if len(curves) > 1 else 0 * mean
        steps = np.arange(1, len(mean) + 1)
        ax.plot(steps, mean, label=agent)
        ax.fill_between(steps, mean - sem, mean + sem, alpha=0.2)
        print(
            f"{agent:>7}: mean best score {mean[-1]:.4f} ± {np.atleast_1d(sem)[-1]:.4f}  ({path})"
        )
    ax.set(xlabel="experiments", ylabel="mean best score so far", title=args.task)
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(args.out / "comparison.png")
    print(f"plot: {args.out / 'comparison.png'}")


if __name__ == "__main__":
    main()
