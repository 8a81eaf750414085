"""What honest statistics cost in the LJ lab: equilibration and correlation analysis per
experiment, against the production simulation itself.

    python bench/honest_stats.py [--rounds 3] [--batch 16]

One step of ``batch`` experiments (4 replica boxes of 108 atoms each, as
``LJEquationOfState-v2`` runs them) at the shortest and the longest production length.
Timed separately, median of ``rounds``: the production MD alone, the 800 equilibration steps,
and the error analysis (pymbar's statistical inefficiency over the replicas plus the replica
spread, for 3 observables per experiment). Prints a Markdown table of seconds and fractions.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from labtwin.simulators.md.build import lj_fluid
from labtwin.simulators.md.lj_warp import run_lj
from labtwin.simulators.md.observables import replica_estimate
from labtwin.simulators.md.state import MDState
from labtwin.tasks.md_eos import REPLICAS, SAMPLE_EVERY


def boxes(n_experiments: int) -> MDState:
    return MDState.concatenate(
        [lj_fluid(108, 0.6, 2.0, seed=s) for s in range(n_experiments * REPLICAS)]
    )


def timed(function, rounds: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(rounds):
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=16)
    args = parser.parse_args()
    n = args.batch
    state = boxes(n)
    seeds = np.arange(n * REPLICAS)

    def md(steps: int, equilibration: int):
        return run_lj(
            state,
            steps,
            temperature=2.0,
            friction=1.0,
            seed=seeds,
            sample_every=SAMPLE_EVERY,
            n_equilibration=equilibration,
            cutoff=2.45,
        )

    md(SAMPLE_EVERY, 0)  # load the kernels
    rows = [
        "| production steps | production MD (s) | equilibration, 800 steps (s) | error analysis (s) "
        "| equilibration / production | analysis / production |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for steps in (200, 2000):
        production, result = timed(lambda steps=steps: md(steps, 0), args.rounds)
        with_equilibration, _ = timed(lambda steps=steps: md(steps, 800), args.rounds)
        equilibration = with_equilibration - production

        def analyse(result=result):
            for i in range(n):
                for name in ("pressure", "potential_energy", "temperature"):
                    replica_estimate(result.series[name][:, i * REPLICAS : (i + 1) * REPLICAS].T)

        analysis, _ = timed(analyse, args.rounds)
        rows.append(
            f"| {steps} | {production:.3f} | {equilibration:.3f} | {analysis:.3f} | "
            f"{equilibration / production:.2f} | {analysis / production:.3f} |"
        )
    print(f"{n} experiments x {REPLICAS} boxes x 108 atoms, device {result.device}")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
