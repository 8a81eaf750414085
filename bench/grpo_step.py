"""Where a GRPO step's time goes, and whether overlapping simulation with generation pays.

Part 1, phases: ``--steps`` GRPO steps built from labtwin's trainer
(``TrainConfig``, ``make_policy``, ``make_grammar``, ``run_episodes``,
``group_advantages``, ``grpo_update``) on the tiny model, split into

- generation: batched sampling of the tool calls (constrained by the grammar),
- simulation: the batched environment step (parse calls, one simulator call,
  describe the measurements),
- other rollout work: tokenising the tool results with the chat template,
- optimisation: the GRPO forward/backward passes and the optimizer step.

Part 2, overlap: the rollout of the same campaigns (same seeds) three ways,
each with the real rollout engine (``run_episodes``):

- ``1 batch``: one ``run_episodes`` over every campaign: generate for every
  live conversation, then step them all with one simulator call;
- ``2 halves``: the campaigns split in two halves, one ``run_episodes`` after
  the other (no overlap: isolates the cost of halving the generation batch);
- ``2 halves, overlapped``: the two halves' ``run_episodes`` in two threads
  that take turns at the model (one ``generate`` at a time), so that while one
  half's simulator step runs, the other half generates.

Each is timed with the reactor as it is (torch RK4 kinetics on the CPU) and
with ``--sim-delay`` seconds added to every simulator call by ``time.sleep``.
A sleep releases the GIL and uses no core, so it models a simulator that runs
outside the Python thread (a GPU kernel, an MD engine in C++, a remote
instrument): the best case for overlap. Sampling is stochastic and the
batches differ between layouts, so each layout reports its generated tokens;
layouts alternate over ``--repeats`` and the median is shown.

    python bench/grpo_step.py --smoke          # under a minute, CI
    python bench/grpo_step.py                  # a few minutes on 2 CPU cores
    python bench/grpo_step.py --record --heading "2026-12-01, CPU, 2 cores"
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rich.console import Console
from rich.table import Table

import labtwin
from labtwin.agents.grpo import group_advantages, zero_variance_mask
from labtwin.agents.rollout import run_episodes
from labtwin.agents.train import SeedStreams, TrainConfig, grpo_update, make_grammar, make_policy

RESULTS = Path(__file__).with_name("RESULTS.md")
LAYOUTS = ("1 batch", "2 halves", "2 halves, overlapped")


@dataclass
class Config:
    steps: int = 3  # GRPO steps timed in part 1 (after one warm-up step)
    campaigns: int = 4  # campaign seeds (GRPO groups) per step
    group_size: int = 8  # campaigns per seed
    budget: int = 2  # experiments (turns) per campaign
    max_new_tokens: int = 96  # tokens per reply
    sim_delay: float = 0.5  # seconds added to each simulator call in part 2's second case
    repeats: int = 3  # rollouts per layout in part 2 (median reported)


# ---- part 1: the phases of a GRPO step --------------------------------------------------


def time_phases(cfg: Config) -> dict[str, float]:
    """Mean seconds per GRPO step of each phase."""
    train_cfg = TrainConfig(
        campaigns_per_step=cfg.campaigns,
        group_size=cfg.group_size,
        budget=cfg.budget,
        max_new_tokens=cfg.max_new_tokens,
        warmstart_steps=0,
        progress=False,
    )
    task = labtwin.load_task(train_cfg.task, budget=cfg.budget)
    policy = make_policy(train_cfg)
    grammar = make_grammar(policy, task, train_cfg)
    optimizer = torch.optim.AdamW(policy.model.parameters(), lr=train_cfg.learning_rate)
    streams = SeedStreams(train_cfg.seed)
    totals: dict[str, list[float]] = {}
    for step in range(1, cfg.steps + 2):  # step 1 warms up (allocations, grammar caches)
        start = time.perf_counter()
        episodes, timing = run_episodes(
            policy,
            task,
            streams.train_campaigns(step, cfg.campaigns),
            cfg.group_size,
            train_cfg.invalid_penalty,
            cfg.max_new_tokens,
            train_cfg.temperature,
            grammar,
            seed=streams.train_sampling(step),
        )
        rollout_s = time.perf_counter() - start
        rewards = torch.tensor([e.reward for e in episodes], dtype=torch.float32)
        advantages = group_advantages(rewards, cfg.group_size)
        keep = ~zero_variance_mask(rewards, cfg.group_size)
        kept = [e for e, k in zip(episodes, keep.tolist()) if k]
        start = time.perf_counter()
        if kept:
            grpo_update(policy, None, optimizer, kept, advantages[keep], train_cfg)
        optimisation_s = time.perf_counter() - start
        if step == 1:
            continue
        phases = {
            "generation": timing.generation_s,
            "simulation": timing.simulation_s,
            "other rollout work": rollout_s - timing.generation_s - timing.simulation_s,
            "optimisation": optimisation_s,
        }
        for name, seconds in phases.items():
            totals.setdefault(name, []).append(seconds)
    return {name: float(np.mean(v)) for name, v in totals.items()}


# ---- part 2: overlapping simulation with generation ----------------------------------------


def with_delay(task: labtwin.Task, delay: float) -> labtwin.Task:
    """The same lab, with ``delay`` seconds of GIL-free waiting added to each simulator call."""
    if delay <= 0:
        return task
    simulate = task.simulate

    def slow_simulate(experiments, conditions, rngs):
        time.sleep(delay)
        return simulate(experiments, conditions, rngs)

    task.simulate = slow_simulate  # type: ignore[method-assign]
    return task


class SerialGeneration:
    """The policy with one ``generate`` at a time, for rollouts that run in threads.

    Two ``run_episodes`` in two threads, each on half the campaigns, then take
    turns at the model: while one half's simulator step runs, the other half
    generates. Generation itself never overlaps generation, as in one process
    with one model.
    """

    def __init__(self, policy: Any) -> None:
        self.policy = policy
        self.tokenizer = policy.tokenizer
        self.stop_token_ids = policy.stop_token_ids
        self._lock = threading.Lock()

    def encode_chats(self, *args: Any, **kwargs: Any) -> list[list[int]]:
        return self.policy.encode_chats(*args, **kwargs)

    def generate(self, *args: Any, **kwargs: Any) -> list[Any]:
        with self._lock:
            return self.policy.generate(*args, **kwargs)


def rollout(
    policy: Any,
    task: labtwin.Task,
    grammar: Any,
    seeds: list[int],
    cfg: Config,
    layout: str,
    pool: ThreadPoolExecutor,
    sample_seed: int,
) -> tuple[float, int]:
    """Run the campaigns of ``seeds`` to their end with ``run_episodes``; (seconds, tokens).

    Every layout runs the same campaigns (each seed ``group_size`` times);
    ``layout`` is one of :data:`LAYOUTS`.
    """
    campaign_seeds = [s for s in seeds for _ in range(cfg.group_size)]
    halves = [[int(s) for s in half] for half in np.array_split(campaign_seeds, 2)]

    def run(engine: Any, part: list[int], k: int) -> int:
        _, timing = run_episodes(
            engine,
            task,
            part,
            1,  # the seeds are already repeated per group
            max_new_tokens=cfg.max_new_tokens,
            logits_processor=grammar,
            seed=sample_seed + 1000 * k,
        )
        return timing.tokens_generated

    start = time.perf_counter()
    if layout == "1 batch":
        tokens = run(policy, campaign_seeds, 0)
    elif layout == "2 halves":
        tokens = sum(run(policy, half, k) for k, half in enumerate(halves))
    else:  # "2 halves, overlapped"
        engine = SerialGeneration(policy)
        futures = [pool.submit(run, engine, half, k) for k, half in enumerate(halves)]
        tokens = sum(f.result() for f in futures)
    return time.perf_counter() - start, tokens


def time_overlap(cfg: Config, delay: float) -> dict[str, tuple[float, int]]:
    """Median seconds and tokens of one rollout per layout."""
    train_cfg = TrainConfig(budget=cfg.budget, max_new_tokens=cfg.max_new_tokens)
    task = with_delay(labtwin.load_task(train_cfg.task, budget=cfg.budget), delay)
    policy = make_policy(train_cfg)
    grammar = make_grammar(policy, task, train_cfg)
    seeds = SeedStreams(train_cfg.seed).eval_campaigns(cfg.campaigns)
    times: dict[str, list[float]] = {name: [] for name in LAYOUTS}
    tokens: dict[str, list[int]] = {name: [] for name in LAYOUTS}
    with ThreadPoolExecutor(max_workers=2) as pool:
        rollout(policy, task, grammar, seeds, cfg, LAYOUTS[-1], pool, 0)  # warm-up
        for repeat in range(cfg.repeats):
            for name in LAYOUTS:
                seconds, n = rollout(policy, task, grammar, seeds, cfg, name, pool, repeat)
                times[name].append(seconds)
                tokens[name].append(n)
    return {name: (statistics.median(times[name]), int(np.mean(tokens[name]))) for name in LAYOUTS}


# ---- report ----------------------------------------------------------------------------------


def phase_table(phases: dict[str, float], cfg: Config) -> Table:
    total = sum(phases.values())
    table = Table(
        min_width=60,
        title=f"GRPO step, tiny model: {cfg.campaigns} x {cfg.group_size} campaigns "
        f"of {cfg.budget} experiments",
    )
    table.add_column("phase")
    table.add_column("s / step", justify="right")
    table.add_column("share", justify="right")
    for name, seconds in phases.items():
        table.add_row(name, f"{seconds:.2f}", f"{seconds / total:.0%}")
    table.add_row("total", f"{total:.2f}", "100%", style="bold")
    return table


def overlap_table(results: dict[float, dict[str, tuple[float, int]]]) -> Table:
    table = Table(title="One rollout: simulator step in a background thread vs in line")
    table.add_column("simulator")
    table.add_column("layout")
    table.add_column("s / rollout", justify="right")
    table.add_column("tokens", justify="right")
    table.add_column("vs 1 batch", justify="right")
    for delay, rows in results.items():
        base = rows["1 batch"][0]
        label = "reactor as is" if delay <= 0 else f"reactor + {delay:g} s sleep / call"
        for name, (seconds, tokens) in rows.items():
            table.add_row(label, name, f"{seconds:.2f}", str(tokens), f"{base / seconds:.2f}x")
            label = ""
    return table


def markdown(
    heading: str,
    cfg: Config,
    phases: dict[str, float],
    results: dict[float, dict[str, tuple[float, int]]],
) -> str:
    total = sum(phases.values())
    lines = [
        f"## {heading}: GRPO step phases and simulation/generation overlap (`bench/grpo_step.py`)",
        "",
        f"Tiny model (labtwin `make_policy`, constrained tool calls), BatchReactor-v1, "
        f"{cfg.campaigns} x {cfg.group_size} campaigns of {cfg.budget} experiments, "
        f"{cfg.max_new_tokens} new tokens per reply, torch 1 thread; mean of {cfg.steps} steps.",
        "",
        "| phase | s / step | share |",
        "| --- | ---: | ---: |",
    ]
    lines += [f"| {n} | {s:.2f} | {s / total:.0%} |" for n, s in phases.items()]
    lines += [
        f"| total | {total:.2f} | 100% |",
        "",
        f"One rollout of the same campaigns, median of {cfg.repeats}:",
        "",
        "| simulator | layout | s / rollout | tokens | vs 1 batch |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for delay, rows in results.items():
        label = "reactor as is" if delay <= 0 else f"reactor + {delay:g} s sleep / call"
        base = rows["1 batch"][0]
        for name, (seconds, tokens) in rows.items():
            lines.append(f"| {label} | {name} | {seconds:.2f} | {tokens} | {base / seconds:.2f}x |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    defaults = Config()
    for name, value in vars(defaults).items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, under a minute")
    parser.add_argument("--record", action="store_true", help=f"append the results to {RESULTS}")
    parser.add_argument(
        "--heading", default=f"{date.today()}, CPU, {os.cpu_count()} cores", help="for --record"
    )
    args = parser.parse_args()
    cfg = Config(**{k: getattr(args, k) for k in vars(defaults)})
    if args.smoke:
        cfg = Config(steps=1, campaigns=2, group_size=2, budget=2, sim_delay=0.2, repeats=1)
    torch.set_num_threads(1)  # the tiny model is fastest on one thread on a busy machine
    torch.manual_seed(0)

    console = Console(width=110)
    phases = time_phases(cfg)
    console.print(phase_table(phases, cfg))
    results = {delay: time_overlap(cfg, delay) for delay in (0.0, cfg.sim_delay)}
    console.print(overlap_table(results))
    if args.record:
        text = markdown(args.heading, cfg, phases, results)
        lead = "\n" if RESULTS.exists() else "# Benchmark results\n\n"
        with RESULTS.open("a") as f:
            f.write(lead + text)
        console.print(f"recorded in {RESULTS}")


if __name__ == "__main__":
    main()
