"""Ignition shots per second: in this process, one after another, against 2 worker processes.

    python bench/combustion.py [--shots 24] [--rounds 3] [--seed 0]

``shots`` random experiments of IgnitionDelay-v1 (uniform in its numeric view, so every
fuel, diluent and corner of the box) are integrated by the engine
(:class:`~labtwin.simulators.combustion.IgnitionPool`) with ``workers=0`` (in process, no
isolation) and ``workers=2`` (each case alone in a spawned worker, with a timeout). Every
round uses a fresh pool, so nothing is served from the cache; the 2-worker rows are timed
once the workers are up (start-up, about 2 s a worker, is timed separately). Median of
``rounds``. Prints a Markdown table; the results of both paths are checked to be equal.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
from _report import add_markdown_option, markdown_section

from labtwin.simulators.combustion import IgnitionPool
from labtwin.tasks.combustion import SETTINGS, IgnitionDelay, case_of


def shots(n: int, seed: int) -> list:
    lab = IgnitionDelay(workers=0)
    rng = np.random.default_rng(seed)
    return [case_of(lab.random_experiment(rng)) for _ in range(n)]


def timed_run(workers: int, cases: list) -> tuple[float, float, list]:
    """Seconds to start the workers (a one-case warm-up), seconds for the cases, results."""
    with IgnitionPool(workers=workers) as pool:
        start = time.perf_counter()
        if workers:  # one warm-up case per worker starts them all
            pool.run([_warmup(cases[0], 0.5 * (k + 1)) for k in range(workers)], SETTINGS)
        startup = time.perf_counter() - start
        start = time.perf_counter()
        results = pool.run(cases, SETTINGS)
        return startup, time.perf_counter() - start, results


def _warmup(case, bump: float = 0.5):
    """A case that differs from every shot (so the shots are not cached by the warm-up)."""
    from dataclasses import replace

    return replace(case, temperature_K=case.temperature_K + bump)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shots", type=int, default=24)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, seconds")
    add_markdown_option(parser)
    args = parser.parse_args()
    if args.smoke:
        args.shots, args.rounds = 2, 1
    with markdown_section(
        args.markdown,
        "Ignition shots per second: in process and on 2 worker processes (Cantera, GRI-Mech 3.0)",
    ):
        _run(args)


def _run(args: argparse.Namespace) -> None:
    cases = shots(args.shots, args.seed)
    rows = {}
    reference = None
    for workers in (0, 2):
        runs = [timed_run(workers, cases) for _ in range(args.rounds)]
        seconds = statistics.median(r[1] for r in runs)
        startup = statistics.median(r[0] for r in runs)
        results = runs[-1][2]
        delays = np.array([r.delay_s for r in results])
        if reference is None:
            reference = delays
        assert np.array_equal(delays, reference, equal_nan=True), (
            "the worker processes measured other delays than the in-process engine"
        )
        rows[workers] = (seconds, startup, results)
    ignited = sum(r.status == "ignited" for r in rows[0][2])
    load = os.getloadavg()[0]
    print(
        f"{args.shots} shots ({ignited} ignited), median of {args.rounds} rounds, "
        f"load average {load:.1f} on {os.cpu_count()} cores"
    )
    print()
    print("| engine | shots/s | seconds | worker start-up (s) | speed-up |")
    print("| --- | ---: | ---: | ---: | ---: |")
    serial = rows[0][0]
    for workers, (seconds, startup, _) in rows.items():
        name = "in process, serial" if workers == 0 else f"{workers} worker processes"
        start = "-" if workers == 0 else f"{startup:.2f}"
        print(
            f"| {name} | {args.shots / seconds:.2f} | {seconds:.2f} | {start} | "
            f"{serial / seconds:.2f}x |"
        )


if __name__ == "__main__":
    main()
