"""Batch-reactor kinetics, reactors per second: labtwin's Warp kernel against scipy's RK45.

    python bench/kinetics.py [--large] [--rounds 3] [--seed 0] [--smoke] [--markdown FILE]

The workload is BatchReactor-v1's: its network (A -> B -> C, 2A -> D), its random
experiments (uniform over the knob box: 300-380 K, 1-180 min log-uniform, 0.1-2 mol/L,
0-5 mol%) and a campaign's reagents for each (the lab's kinetics spread), integrated to
the lab's 41 sample times. labtwin is :func:`labtwin.simulators.kinetics.integrate` at its
default tolerances (one kernel launch for the batch, on the CPU; a CUDA row is added
where torch sees a GPU); scipy is ``solve_ivp(method="RK45", t_eval=...)`` looped over the
reactors with a hand-written numpy right-hand side for this network (its fastest case).

Matched accuracy: both are checked against DOP853 at rtol 1e-13 on the same reactors
(the worst error at any sample, as a fraction of the feed); scipy runs at the loosest
rtol of 1e-6 ... 1e-11 (atol = 1e-3 rtol mol/L) whose error is no larger than labtwin's.
Timing: median of ``rounds`` rounds, one thread each (``torch.set_num_threads(1)``; Warp
on the CPU runs one thread; scipy is single-threaded). Warp compiles the kernel once per
network and caches it on disk: the first call is not timed, and is reported separately,
both from the disk cache and compiled from nothing (a fresh cache, in a subprocess).
scipy's rate is measured once, on 256 reactors (a loop: its cost per reactor does not
depend on N); labtwin integrates those same 256 as 256 batches of 1 or 4 of 64, and the
first 256 of its larger batches are those too.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
from _report import add_markdown_option, markdown_section
from scipy.integrate import solve_ivp

from labtwin.simulators.kinetics import integrate
from labtwin.simulators.kinetics.network import ATOL, RTOL
from labtwin.tasks.reactor import NETWORK, BatchReactor, rate_constants

N_SAMPLES = 41  # the lab's time-course samples
SCIPY_RTOLS = (1e-6, 1e-7, 1e-8, 1e-9, 1e-10, 1e-11)
SCIPY_TIMED = 256  # reactors scipy is timed on per round, at most
GOALS = {1: 1.0, 4096: 100.0}  # the aims: at least scipy's speed, 100x at N = 4096


def workload(n: int, seed: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    """c0 (n, 4), k (n, 3) and t_end (n,) of n BatchReactor-v1 runs with their reagents
    (drawn run by run, so the first m of any n are the same m)."""
    lab = BatchReactor()
    rng = np.random.default_rng(seed)
    runs, conditions = [], []
    for _ in range(n):
        runs.append(lab.random_experiment(rng))
        conditions.append(lab.sample_conditions(rng))
    temperature = np.array([r.temperature_K for r in runs])
    loading = np.array([r.catalyst_mol_pct for r in runs])
    k = rate_constants(conditions, temperature, loading, device=device)
    c0 = torch.zeros(n, len(NETWORK.species), dtype=torch.float64, device=device)
    c0[:, 0] = torch.tensor([r.feed_conc_mol_L for r in runs], dtype=torch.float64)
    t_end = torch.tensor([r.time_min for r in runs], dtype=torch.float64, device=device)
    return c0, k, t_end


def scipy_courses(c0, k, t_end, rtol: float, atol: float, method: str = "RK45") -> np.ndarray:
    """(n, N_SAMPLES, 4) time courses, one solve_ivp call per reactor."""
    out = np.empty((len(c0), N_SAMPLES, c0.shape[1]))
    for i, (c, (k1, k2, k3), t) in enumerate(zip(c0, k, t_end)):

        def rhs(_t, y, k1=k1, k2=k2, k3=k3):
            r1, r2, r3 = k1 * y[0], k2 * y[1], k3 * y[0] * y[0]
            return np.array([-r1 - 2.0 * r3, r1 - r2, r2, r3])

        times = np.linspace(0.0, t, N_SAMPLES)
        solution = solve_ivp(rhs, (0.0, t), c, method=method, t_eval=times, rtol=rtol, atol=atol)
        out[i] = solution.y.T
    return out


def worst_error(courses: np.ndarray, reference: np.ndarray, feed: np.ndarray) -> float:
    return float((np.abs(courses - reference) / feed[:, None, None]).max())


def median_seconds(call, rounds: int, min_round_s: float = 0.2) -> float:
    """Median over rounds of the seconds per call (a round repeats short calls)."""
    per_call = []
    for _ in range(rounds):
        repeats, start = 0, time.perf_counter()
        while True:
            call()
            repeats += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_round_s:
                break
        per_call.append(elapsed / repeats)
    return statistics.median(per_call)


FIRST_CALL = """
import time, sys
import torch
import warp as wp
from labtwin.simulators.kinetics import integrate
from labtwin.tasks.reactor import NETWORK
if sys.argv[1]:
    wp.config.kernel_cache_dir = sys.argv[1]
start = time.perf_counter()
c0 = torch.tensor([[1.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
k = torch.tensor([[0.3, 0.05, 0.1]], dtype=torch.float64)
integrate(NETWORK, c0, k, torch.tensor([30.0], dtype=torch.float64))
print(time.perf_counter() - start)
"""


def first_call_seconds(cache_dir: str) -> float:
    """Seconds of a new process's first integrate call (imports done): Warp's start-up
    and the kernel, loaded from the disk cache ("") or compiled into the empty ``cache_dir``."""
    done = subprocess.run(
        [sys.executable, "-c", FIRST_CALL, cache_dir], capture_output=True, text=True, check=True
    )
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--large", action="store_true", help="add N = 16384")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, seconds")
    add_markdown_option(parser)
    args = parser.parse_args()
    title = "Batch-reactor kinetics: reactors per second, labtwin's Warp kernel vs scipy RK45"
    with markdown_section(args.markdown, title):
        _run(args)


def _run(args: argparse.Namespace) -> None:
    torch.set_num_threads(1)
    sizes = (1, 8) if args.smoke else (1, 64, 4096) + ((16384,) if args.large else ())
    rounds = 1 if args.smoke else max(3, args.rounds)
    scipy_timed = 4 if args.smoke else SCIPY_TIMED
    cpu = torch.device("cpu")
    devices = [cpu] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
    load_before = os.getloadavg()
    from labtwin.simulators.kinetics import _kernels  # noqa: F401  (Warp starts here)

    # first calls, before anything here has touched Warp
    compile_s = float("nan")  # --smoke skips the compilation (about 6 s on an idle core)
    if not args.smoke:
        with tempfile.TemporaryDirectory() as empty:
            compile_s = first_call_seconds(empty)
    cached_s = first_call_seconds("")

    # matched accuracy, on the largest batch's first reactors
    n_check = 4 if args.smoke else 64
    c0, k, t_end = workload(max(sizes), args.seed, cpu)
    c0, k, t_end = c0[:n_check], k[:n_check], t_end[:n_check]
    inputs = [x.numpy() for x in (c0, k, t_end)]
    feed = inputs[0][:, 0]
    reference = scipy_courses(*inputs, rtol=1e-13, atol=1e-16, method="DOP853")
    ours = integrate(NETWORK, c0, k, t_end, n_samples=N_SAMPLES).concentrations.numpy()
    our_error = worst_error(ours, reference, feed)
    scipy_rtol, scipy_error = SCIPY_RTOLS[-1], float("nan")
    for rtol in SCIPY_RTOLS:
        scipy_error = worst_error(scipy_courses(*inputs, rtol, 1e-3 * rtol), reference, feed)
        if scipy_error <= our_error:
            scipy_rtol = rtol
            break
    scipy_atol = 1e-3 * scipy_rtol

    # scipy's rate: its loop over the first reactors of every batch (the same reactors)
    host = [x[:scipy_timed].numpy() for x in workload(scipy_timed, args.seed, cpu)]
    scipy_s = median_seconds(lambda: scipy_courses(*host, scipy_rtol, scipy_atol), rounds, 0.0)
    scipy_rate = scipy_timed / scipy_s

    rows = []
    for n in sizes:
        # at least scipy_timed reactors a round, as batches of n: N = 1 and 64 integrate
        # the very reactors scipy does, one batch after another
        n_batches = max(1, scipy_timed // n)
        for device in devices:
            c0, k, t_end = workload(n * n_batches, args.seed, device)
            batches = list(zip(c0.split(n), k.split(n), t_end.split(n), strict=True))

            def ours_call(batches=batches, device=device):
                for batch in batches:
                    integrate(NETWORK, *batch, n_samples=N_SAMPLES)
                if device.type == "cuda":
                    torch.cuda.synchronize()

            ours_call()  # warm-up: the kernel is loaded once per process
            ours_s = median_seconds(ours_call, rounds)
            steps = integrate(NETWORK, c0, k, t_end, n_samples=N_SAMPLES).steps.double().mean()
            rows.append((n, device.type, n * n_batches / ours_s, float(steps), scipy_rate))

    load_after = os.getloadavg()
    print(
        f"BatchReactor-v1 runs ({N_SAMPLES} samples each), median of {rounds} rounds, one "
        f"thread each; load average {load_before[0]:.2f} before, {load_after[0]:.2f} after, "
        f"on {os.cpu_count()} cores."
    )
    print()
    print(
        f"Accuracy against DOP853 (rtol 1e-13), worst error at any sample over {n_check} "
        f"reactors, fraction of the feed: labtwin (rtol {RTOL:g}, atol {ATOL:g} mol/L) "
        f"{our_error:.1e}; scipy RK45 at rtol {scipy_rtol:g}, atol {scipy_atol:g} mol/L "
        f"{scipy_error:.1e} (the loosest of {SCIPY_RTOLS[0]:g} ... {SCIPY_RTOLS[-1]:g} "
        "no worse than labtwin)."
    )
    print()
    print(
        f"First call of a new process (not in the timed rounds): {cached_s:.2f} s with the "
        f"kernel in Warp's disk cache, {compile_s:.2f} s compiling it (a fresh cache)."
    )
    print()
    print(
        "| N | device | labtwin reactors/s | steps per reactor | scipy RK45 reactors/s | ratio | aim |"
    )
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for n, device, ours_rate, steps, scipy_rate in rows:
        aim = f">= {GOALS[n]:g}x" if n in GOALS and device == "cpu" else ""
        print(
            f"| {n} | {device} | {ours_rate:,.0f} | {steps:.0f} | {scipy_rate:,.0f} | "
            f"{ours_rate / scipy_rate:,.1f}x | {aim} |"
        )
    print()
    cpu_rows = {n: r for n, d, r, _, _ in rows if d == "cpu"}
    small, large = min(cpu_rows), max(cpu_rows)
    print(
        f"Reading. One launch integrates the batch, each reactor with its own step: a call "
        f"for one reactor costs {1e6 / cpu_rows[small]:,.0f} us (mostly Python, tensor set-up "
        f"and the launch), a reactor in a batch of {large} {1e6 / cpu_rows[large]:,.1f} us "
        "(the kernel's arithmetic), while scipy pays Python for every step of every reactor, "
        "whatever N."
    )


if __name__ == "__main__":
    main()
