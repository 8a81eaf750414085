"""What honest statistics cost in the MD labs: equilibration and correlation analysis per
experiment, against the production simulation itself.

    python bench/honest_stats.py [--rounds 3] [--batch 16]     # LJEquationOfState-v2
    python bench/honest_stats.py --water [--rounds 3]          # WaterDensity-v2

One step of ``batch`` experiments (4 replica boxes of 108 atoms each, as
``LJEquationOfState-v2`` runs them) at the shortest and the longest production length.
Timed separately, median of ``rounds``: the production MD alone, the 800 equilibration steps,
and the error analysis (pymbar's statistical inefficiency over the replicas plus the replica
spread, for 3 observables per experiment). Prints a Markdown table of seconds and fractions.

``--water``: one ``WaterDensity-v2`` experiment (4 replicas of 129 TIP3P waters, OpenMM) at
the shortest and the longest production, with and without its 2 ps of equilibration per
replica, and the same error analysis; the stock of starting boxes is grown before timing
(once per process; its time is printed too).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from _report import add_markdown_option, markdown_section

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
    parser.add_argument("--water", action="store_true", help="WaterDensity-v2 instead")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, seconds")
    add_markdown_option(parser)
    args = parser.parse_args()
    if args.smoke:
        args.rounds, args.batch = 1, 2
    import warp as wp

    wp.config.log_level = wp.LOG_WARNING  # no start-up banner in the section
    title = "What honest statistics cost in the " + ("water lab" if args.water else "LJ lab")
    with markdown_section(args.markdown, title):
        _run(args)


def _run(args: argparse.Namespace) -> None:
    if args.water:
        return water(args.rounds)
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


def water(rounds: int) -> None:
    from labtwin.simulators.md.openmm_engine import water_npt_replicas
    from labtwin.tasks.md_water import SAMPLE_EVERY as WATER_SAMPLE_EVERY

    def run(production_ps: float, equilibration_ps: float):
        return water_npt_replicas(
            300.0,
            1.0,
            n_replicas=4,
            equilibration_ps=equilibration_ps,
            production_ps=production_ps,
            equilibration_dt_fs=4.0,
            sample_every=WATER_SAMPLE_EVERY,
            seed=1,
        )

    stock, warm = timed(lambda: run(0.1, 0.0), 1)  # grows the stock at the nearest grid state
    replica_estimate(warm.density)  # imports pymbar before anything is timed
    rows = [
        "| production per replica (ps) | production MD (s) | equilibration, 4 x 2 ps (s) "
        "| error analysis (s) | equilibration / production | analysis / production |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for production_ps in (0.25, 1.0):
        production, result = timed(lambda p=production_ps: run(p, 0.0), rounds)
        with_equilibration, _ = timed(lambda p=production_ps: run(p, 2.0), rounds)
        equilibration = with_equilibration - production

        def analyse(result=result):
            for series in (result.density, result.potential_energy, result.kinetic_temperature):
                replica_estimate(series)

        analysis, _ = timed(analyse, rounds)
        rows.append(
            f"| {production_ps:g} | {production:.2f} | {equilibration:.2f} | {analysis:.4f} | "
            f"{equilibration / production:.2f} | {analysis / production:.4f} |"
        )
    print(f"1 experiment x 4 replicas x {result.n_waters} waters, OpenMM {result.platform}")
    print(f"stock of starting boxes at the nearest grid state, once per process: {stock:.1f} s")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
