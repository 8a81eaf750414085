"""The measured result of docs/evaluation.md: pass@k and reward vs compute on the reactor.

1. Train the README's main job for longer: ``labtwin train`` with its defaults
   (BatchReactor-v1, the tiny model, budget 2, warm start, groups of 8) for ``--steps``
   GRPO steps, evaluating every ``--eval-every`` steps. The weights at step 20 are the
   main job's (every step's seeds depend only on the run's seed and the step), and the run
   saves the warm-started policy.
2. Evaluate on the lab's held-out campaigns (``--campaigns`` seeds x ``--samples`` each):
   the untrained policy, the warm-started one, GRPO after 20 steps (the main job) and after
   ``--steps``, and random search, CMA-ES and Bayesian optimisation; pass@k, pass^k, sample
   efficiency and the hack rate on the impossible variant.
3. Fit reward against GRPO compute over the run's evaluations.
4. Write the three figures to docs/images/ and print the tables for the docs.

A run that exists is reused (``--fresh`` starts over). On 2 shared CPU cores the training
takes about ten minutes and the evaluation about as long.

    python bench/eval_reactor.py --smoke     # about a minute: the pipeline, tiny sizes
    python bench/eval_reactor.py             # the docs' figures
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

import numpy as np

from labtwin.agents.evaluation.compute_fit import fit_reward_curve
from labtwin.agents.evaluation.config import EvalConfig
from labtwin.agents.evaluation.driver import (
    AgentSpec,
    baseline_agents,
    evaluate_agents,
    load_policy,
    markdown_table,
    model_agent,
    remove_evaluation,
    train_config_of,
)
from labtwin.agents.evaluation.scaling import fit_run
from labtwin.agents.train import TrainConfig, train

IMAGES = Path(__file__).resolve().parents[1] / "docs" / "images"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("runs/bench-eval"))
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--eval-every", type=int, default=4)
    parser.add_argument("--campaigns", type=int, default=16)
    parser.add_argument("--samples", type=int, default=32)
    parser.add_argument("--hack-samples", type=int, default=4)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes; no docs figures")
    parser.add_argument("--fresh", action="store_true", help="train and evaluate again")
    args = parser.parse_args()
    if args.smoke:
        args.out, args.steps, args.eval_every = Path("runs/bench-eval-smoke"), 2, 1
        args.campaigns, args.samples, args.hack_samples = 2, 2, 1

    run_dir = args.out / f"grpo-{args.steps}"
    if args.fresh and run_dir.exists():
        shutil.rmtree(run_dir)
    start = time.perf_counter()
    if not (run_dir / "summary.json").exists():
        shutil.rmtree(run_dir, ignore_errors=True)  # an unfinished run: start it again
        extra = {}
        if args.smoke:
            extra = dict(campaigns_per_step=2, group_size=2, eval_campaigns=2, warmstart_steps=2)
        train(TrainConfig(steps=args.steps, eval_every=args.eval_every, out=str(run_dir), **extra))
    print(f"training: {time.perf_counter() - start:.0f} s ({run_dir})")

    cfg = train_config_of(run_dir)
    checkpoints = run_dir / "checkpoints"
    specs = [model_agent(cfg, "untrained")]
    specs.append(AgentSpec("warm_start", "policy", str(checkpoints / "warm_start"), load_policy(checkpoints / "warm_start")))  # fmt: skip
    steps = sorted({min(20, args.steps), args.steps})
    for step in steps:
        path = checkpoints / f"step_{step:06d}"
        specs.append(AgentSpec(f"grpo_{step}", "policy", str(path), load_policy(path)))
    specs += baseline_agents()

    ecfg = EvalConfig(
        task=cfg.task,
        budget=cfg.budget,
        campaigns=args.campaigns,
        samples=args.samples,
        hack_samples=args.hack_samples,
        records=False,
    )
    out = run_dir / "eval"
    remove_evaluation(out)
    start = time.perf_counter()
    summary = evaluate_agents(specs, cfg, ecfg, out, log=print)
    print(f"evaluation: {time.perf_counter() - start:.0f} s")
    points, fit, reason = fit_run(run_dir, out=out)

    print(markdown_table(summary))
    for name, agent in summary["agents"].items():
        if "pass_at_k" in agent:
            k, mean = agent["pass_at_k"]["k"], agent["pass_at_k"]["mean"]
            shown = {j: round(mean[j - 1], 3) for j in (1, 2, 4, 8, 16, 32) if j <= len(k)}
            print(f"{name:>11} pass@k {shown}")
    if fit is None:
        print(f"no fit: {reason}")
    else:
        print(json.dumps(fit.to_dict() | {"chi2_per_dof": fit.chi2 / max(fit.dof, 1)}, indent=1))
    if not args.smoke:
        write_figures(summary, run_dir)


def write_figures(summary: dict, run_dir: Path) -> None:
    """The docs' figures, from the evaluation's summary and the run's curve (80 dpi)."""
    from labtwin.agents.evaluation.plots import plot_compute_fit, plot_efficiency, plot_pass_at_k
    from labtwin.agents.evaluation.scaling import COMPUTE_AXES, METRICS

    IMAGES.mkdir(parents=True, exist_ok=True)
    curve = json.loads((run_dir / "eval" / "curve.json").read_text())
    points = curve["points"]
    fit = fit_reward_curve(points["compute"], points["reward"], points["sigma"])
    figures = {
        "pass_at_k": plot_pass_at_k(summary),
        "efficiency": plot_efficiency(summary),
        "reward_vs_compute": plot_compute_fit(
            np.array(points["compute"]),
            np.array(points["reward"]),
            np.array(points["sigma"]),
            fit,
            COMPUTE_AXES[curve["compute"]],
            METRICS[curve["metric"]],
            title=f"{curve['task']} · {curve['eval_campaigns']} evaluation campaigns",
        ),  # fmt: skip
    }
    for name, figure in figures.items():
        figure.savefig(IMAGES / f"eval_reactor_{name}.png", dpi=80)
    print(f"figures written to {IMAGES}")


if __name__ == "__main__":
    main()
