"""Lab-step throughput on Ray lab workers against one process, and Ray's per-step overhead.

Each contender steps the same ``--campaigns`` campaigns (same seeds, same random
proposals) through ``--steps`` steps of a lab, ``--rounds`` times; a round is a
reset and its steps. Contenders: the local engine (``CampaignBatch`` in this
process) and ``RayCampaignBatch`` with 1 and 2 lab workers on a local Ray cluster
(3 logical CPUs on the machine's cores, so that both Ray contenders stay alive; one
CPU bundle and one torch thread per worker; the local engine also runs one torch
thread). Rounds of the contenders are taken in turn, so that load changes hit all
alike. Labs: the batch reactor with a busy-wait of ``--cost-ms`` per experiment
added to its simulator (a simulator costing a few ms that parallelises across
workers), the batch reactor as it is (a real lab whose batched step costs little),
and an instant simulator (copies of one reading). The overhead is the median Ray
step (1 worker) minus the median local step on the instant simulator: what a step
pays for Ray (pickling the proposals and records, the actor call, ``ray.wait``).
Ray's start and the workers' start are timed once. Weight sync: ``RayGenerator.load_weights``
of the tiny model and a wider one into one generation engine actor. Every contender's records are
checked equal to the local ones.

    python bench/ray_scale.py                    # 16 campaigns, 8 steps, 5 ms, 5 rounds
    python bench/ray_scale.py --smoke            # seconds
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import numpy as np
import torch
from _report import add_markdown_option, markdown_section

from labtwin.campaign import CampaignBatch
from labtwin.tasks.reactor import BatchReactor


class CostlyReactor(BatchReactor):
    """The batch reactor plus ``cost_ms`` of busy CPU per experiment (a costlier simulator)."""

    def __init__(self, cost_ms: float = 5.0, **kwargs) -> None:
        super().__init__(**kwargs)
        self.cost_ms = float(cost_ms)

    def simulate(self, experiments, conditions, rngs):
        end = time.perf_counter() + self.cost_ms * 1e-3 * len(experiments)
        while time.perf_counter() < end:
            pass
        return super().simulate(experiments, conditions, rngs)


class InstantReactor(BatchReactor):
    """The batch reactor with a simulator that costs nothing: copies of one measurement made
    when the lab is built (what remains of a step is the engine's own work, and Ray's)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        rng = np.random.default_rng(0)
        experiment = self.random_experiment(rng)
        self.reading = super().simulate([experiment], [self.nominal_conditions()], [rng])[0]

    def simulate(self, experiments, conditions, rngs):
        return [copy.deepcopy(self.reading) for _ in experiments]


def proposals(task, campaigns: int, steps: int) -> list[list[dict]]:
    rng = np.random.default_rng(0)
    return [
        [task.random_experiment(rng).model_dump(mode="json") for _ in range(campaigns)]
        for _ in range(steps)
    ]


def one_round(batch, plan: list[list[dict]], seeds: list[int]) -> tuple[float, list]:
    """Seconds per step (median over the round's steps) and the records."""
    batch.reset(seeds=seeds)
    slots = list(range(len(seeds)))
    times, records = [], []
    for props in plan:
        start = time.perf_counter()
        records += batch.step(slots, props)
        times.append(time.perf_counter() - start)
    return statistics.median(times), records


def measure(contenders: dict, plan, seeds, rounds: int) -> dict[str, list[float]]:
    """Rounds of every contender taken in turn (so load changes hit all alike), after a
    warm-up round each; every contender's records are checked equal to the first's."""
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for r in range(rounds + 1):
        reference = None  # the local records of this round (campaign ids grow by round)
        for name, batch in contenders.items():
            t, records = one_round(batch, plan, seeds)
            reference = records if reference is None else reference
            if records != reference:
                raise AssertionError(f"{name}: the records differ from the local ones")
            if r:  # round 0 warms up: imports, kernel caches, first pickles
                times[name].append(t)
    return times


def weight_sync(rounds: int, smoke: bool) -> list[tuple[str, float, float]]:
    """Seconds of ``RayGenerator.load_weights`` (one hf engine actor: object-store upload,
    download, ``load_state_dict``) for the tiny model and a wider one; median of rounds."""
    from labtwin.agents.ray_generation import RayGenerator
    from labtwin.agents.train import TrainConfig, make_policy

    out = []
    for hidden, layers in ((64, 2),) if smoke else ((64, 2), (512, 4)):
        cfg = TrainConfig(hidden_size=hidden, layers=layers, progress=False)
        policy = make_policy(cfg)
        mb = sum(v.numel() * v.element_size() for v in policy.model.state_dict().values()) / 1e6
        generator = RayGenerator(policy, cfg)
        try:
            generator.load_weights(policy.model)  # warm-up
            times = []
            for _ in range(rounds):
                start = time.perf_counter()
                generator.load_weights(policy.model)
                times.append(time.perf_counter() - start)
        finally:
            generator.close()
        out.append((f"hidden {hidden}, {layers} layers", mb, statistics.median(times)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--campaigns", type=int, default=16)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--cost-ms", type=float, default=5.0, help="busy CPU per experiment")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, seconds")
    add_markdown_option(parser)
    args = parser.parse_args()
    if args.smoke:
        args.campaigns, args.steps, args.rounds, args.cost_ms = 4, 2, 1, 1.0
    with markdown_section(args.markdown, "Lab steps on Ray lab workers vs one process"):
        _run(args)


def _run(args: argparse.Namespace) -> None:
    import ray

    from labtwin.distributed import LabWorkers, RayCampaignBatch

    torch.set_num_threads(1)
    seeds = list(range(args.campaigns))
    labs = {
        f"batch reactor + {args.cost_ms:g} ms/experiment": CostlyReactor(
            args.cost_ms, budget=args.steps
        ),
        "batch reactor": BatchReactor(budget=args.steps),
        "instant simulator": InstantReactor(budget=args.steps),
    }
    start = time.perf_counter()
    # 3 logical CPUs on 2 cores: the 1-worker and 2-worker contenders are alive together
    ray.init(address="local", num_cpus=3, include_dashboard=False, log_to_driver=False)
    ray_start = time.perf_counter() - start
    rows, worker_start = [], {}
    try:
        for name, task in labs.items():
            pools = {}
            for n in (1, 2):
                start = time.perf_counter()
                pools[n] = LabWorkers(task, n)
                worker_start[n] = time.perf_counter() - start
            contenders = {"local": CampaignBatch(task, args.campaigns)}
            for n, pool in pools.items():
                contenders[f"Ray, {n} worker{'s' * (n > 1)}"] = RayCampaignBatch(
                    task, args.campaigns, workers=pool, timeout_s=600
                )
            plan = proposals(task, args.campaigns, args.steps)
            rows.append((name, measure(contenders, plan, seeds, args.rounds)))
            for pool in pools.values():
                pool.close()
        syncs = weight_sync(args.rounds, args.smoke)
    finally:
        ray.shutdown()

    print(
        f"\n{args.campaigns} campaigns x {args.steps} steps, median step of each round, "
        f"{args.rounds} rounds after a warm-up; torch {torch.__version__}, 1 thread per "
        f"contender; Ray {ray.__version__} local cluster, 3 logical CPUs; contenders' rounds "
        "in turn; records checked equal\n"
    )
    print("| lab | contender | step ms (median of rounds) | experiments/s | vs local |")
    print("| --- | --- | --- | --- | --- |")
    for name, result in rows:
        base = statistics.median(result["local"])
        for contender, times in result.items():
            t = statistics.median(times)
            print(
                f"| {name} | {contender} | {1e3 * t:.1f} | {args.campaigns / t:.0f} | "
                f"{base / t:.2f}x |"
            )
    real, instant = dict(rows)["batch reactor"], dict(rows)["instant simulator"]
    overhead = statistics.median(instant["Ray, 1 worker"]) - statistics.median(instant["local"])
    print(
        f"\nRay's per-step overhead ({args.campaigns} records; instant simulator, 1 worker "
        "minus local): "
        f"{1e3 * overhead:.1f} ms; Ray start {ray_start:.1f} s; workers start "
        f"{worker_start[1]:.1f} s (1), {worker_start[2]:.1f} s (2)"
    )
    print("\n| weight sync, 1 generation engine | MB (float32) | s (median) | MB/s |")
    print("| --- | --- | --- | --- |")
    for name, mb, t in syncs:
        print(f"| {name} | {mb:.1f} | {t:.3f} | {mb / t:.0f} |")
    costly = rows[0][1]
    speedup = statistics.median(costly["local"]) / statistics.median(costly["Ray, 2 workers"])
    real_ratio = statistics.median(real["local"]) / statistics.median(real["Ray, 2 workers"])
    print(
        f"\nReading. At {args.cost_ms:g} ms of simulator per experiment, 2 lab workers give "
        f"{speedup:.2f}x the local throughput (2x is the ceiling on 2 free cores). The real "
        f"lab's batched step costs {1e3 * statistics.median(real['local']):.1f} ms, so Ray's "
        f"{1e3 * overhead:.1f} ms per step leaves it at {real_ratio:.2f}x on two workers: shard "
        "a lab when a shard's step costs well above the per-step overhead."
    )


if __name__ == "__main__":
    main()
