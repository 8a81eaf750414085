"""Molecules per second through the molecule engine: 1 worker, 2 workers, and the cache.

    python bench/molecules.py [--rounds 3] [--molecules 32]
    python bench/molecules.py --molecules 4 --rounds 1   # a smoke run
    python bench/molecules.py --stages descriptors        # one stage (seconds)

Three stages of the measurement pipeline of :class:`~labtwin.simulators.chem.MoleculeEngine`,
on :data:`DRUGS` (real drugs, 17-76 atoms with hydrogens):

- ``descriptors`` — the engine's ``"descriptors"`` kind (RDKit descriptors, QED, SA
  score, structural alerts);
- ``conformers`` — ETKDGv3 + MMFF94 ensembles alone: the engine run with
  :func:`conformers_job` as its job function (the engine has no conformer-only kind; this
  is its extension point, and the results are labelled kind ``"xtb"``, a label only);
- ``xtb`` — the engine's ``"xtb"`` kind: descriptors, the conformer ensemble and a GFN2-xTB
  single point on its lowest conformer (the xTB step's own cost is this stage's time minus
  the other two).

Each is measured three ways: **serial**, an engine with one worker process (the engine
has no in-process mode: every measurement runs in a worker); **parallel**, an engine with
two worker processes; **cached**, the serial engine asked for the same molecules again,
every one a cache hit. Workers are started (and timed) before the rounds; a round times
several batches of the molecules where one batch is short (descriptors: 10 batches of tens
of milliseconds each; the figures are per batch, the round's mean), each recompute batch
clears the cache first, and serial and parallel batches alternate so that a drift of the
machine's speed reaches both. Prints min/median/max molecules per second over the
rounds, the parallel/serial and recompute/cached ratios against the aims (1.8x on two
processes, 1000x for a cache hit), the cores the workers had (their CPU-seconds, from
``/proc``, per wall-second of a round: on a shared machine, what the speed-up could be), and
the caller's screening cost (parse, canonicalise, check: paid on a miss; a SMILES string
seen before skips it through the engine's screening memo, which ``clear_cache`` empties, so
a recompute round pays it).

The peer is the loop a user would write without the engine: RDKit and the same job
function in the calling process, one molecule after another (no isolation from native
crashes, no timeouts, no cache), with ``OMP_NUM_THREADS=1`` as in the workers.

The **ceiling** (descriptors stage) is what the machine allows two processes at that
moment: two processes started before the rounds, each running that plain loop (screening
and the job, no messages), timed alone and both at once in every round; the ceiling is the
pair's aggregate throughput over one loop's alone (2 on two idle cores), to read beside the
engine's parallel / serial ratio, which cannot beat it.

Checked: every molecule is measured ``ok``; every parallel, cached and repeated round equals
the first serial round exactly (``MoleculeResult`` equality: every value bit for bit); a
cached round computes nothing (``engine.computed`` does not move); the plain loops' values
equal the engine's.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # xTB in the in-process loop, as in the workers

import argparse  # noqa: E402
import multiprocessing
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from _report import add_markdown_option, markdown_section

from labtwin.simulators.chem import MoleculeEngine, MoleculeResult, MoleculeSettings
from labtwin.simulators.chem.engine import Job, measure_job, screen_one

#: (name, SMILES) of the drugs measured; neutral parent molecules, one fragment each
DRUGS: tuple[tuple[str, str], ...] = (
    ("aspirin", "CC(=O)Oc1ccccc1C(=O)O"),
    ("ibuprofen", "CC(C)Cc1ccc(cc1)C(C)C(=O)O"),
    ("paracetamol", "CC(=O)Nc1ccc(O)cc1"),
    ("caffeine", "Cn1cnc2c1c(=O)n(C)c(=O)n2C"),
    ("naproxen", "COc1ccc2cc(ccc2c1)C(C)C(=O)O"),
    ("diclofenac", "OC(=O)Cc1ccccc1Nc1c(Cl)cccc1Cl"),
    ("metformin", "CN(C)C(=N)NC(=N)N"),
    ("nicotine", "CN1CCC[C@H]1c1cccnc1"),
    ("diazepam", "CN1C(=O)CN=C(c2ccccc2)c2cc(Cl)ccc21"),
    ("fluoxetine", "CNCCC(Oc1ccc(cc1)C(F)(F)F)c1ccccc1"),
    ("sertraline", "CN[C@H]1CC[C@@H](c2ccc(Cl)c(Cl)c2)c2ccccc21"),
    ("lidocaine", "CCN(CC)CC(=O)Nc1c(C)cccc1C"),
    ("procaine", "CCN(CC)CCOC(=O)c1ccc(N)cc1"),
    ("sulfanilamide", "Nc1ccc(cc1)S(N)(=O)=O"),
    ("sulfamethoxazole", "Cc1cc(NS(=O)(=O)c2ccc(N)cc2)no1"),
    ("trimethoprim", "COc1cc(Cc2cnc(N)nc2N)cc(OC)c1OC"),
    ("metronidazole", "Cc1ncc([N+](=O)[O-])n1CCO"),
    ("isoniazid", "NNC(=O)c1ccncc1"),
    ("phenobarbital", "CCC1(c2ccccc2)C(=O)NC(=O)NC1=O"),
    ("carbamazepine", "NC(=O)N1c2ccccc2C=Cc2ccccc21"),
    ("warfarin", "CC(=O)CC(c1ccccc1)c1c(O)c2ccccc2oc1=O"),
    ("propranolol", "CC(C)NCC(O)COc1cccc2ccccc12"),
    ("omeprazole", "COc1ccc2[nH]c(nc2c1)S(=O)Cc1ncc(C)c(OC)c1C"),
    ("indomethacin", "COc1ccc2n(C(=O)c3ccc(Cl)cc3)c(C)c(CC(=O)O)c2c1"),
    ("celecoxib", "Cc1ccc(cc1)-c1cc(nn1-c1ccc(cc1)S(N)(=O)=O)C(F)(F)F"),
    ("loratadine", "CCOC(=O)N1CCC(=C2c3ccc(Cl)cc3CCc3cccnc32)CC1"),
    ("haloperidol", "OC1(CCN(CCCC(=O)c2ccc(F)cc2)CC1)c1ccc(Cl)cc1"),
    ("amlodipine", "CCOC(=O)C1=C(COCCN)NC(C)=C(C1c1ccccc1Cl)C(=O)OC"),
    ("acyclovir", "Nc1nc2n(COCCO)cnc2c(=O)[nH]1"),
    ("ciprofloxacin", "OC(=O)c1cn(C2CC2)c2cc(N3CCNCC3)c(F)cc2c1=O"),
    ("morphine", "CN1CC[C@]23c4c5ccc(O)c4O[C@H]2[C@@H](O)C=C[C@H]3[C@H]1C5"),
    (
        "atorvastatin",
        "CC(C)c1c(C(=O)Nc2ccccc2)c(-c2ccccc2)c(-c2ccc(F)cc2)n1CC[C@@H](O)C[C@@H](O)CC(=O)O",
    ),
)
#: molecules outside DRUGS that start each engine's workers (and warm up the plain loop in
#: this process) before the timed rounds
WARM_UP = ["CCO", "CCCO"]
PARALLEL_AIM, CACHE_AIM = 1.8, 1000.0


def conformers_job(job: Job) -> MoleculeResult:
    """The ETKDG/MMFF94 stage alone (in a worker): ``mmff_energy_min``,
    ``conformer_strain`` and ``conformer_spread`` of the molecule's ensemble."""
    from rdkit import Chem

    from labtwin.simulators.chem.conformers import conformer_ensemble

    mol = Chem.MolFromSmiles(job.canonical)
    ensemble = conformer_ensemble(mol, job.settings.conformers)
    return MoleculeResult(
        "ok",
        canonical=job.canonical,
        kind=job.kind,
        values=ensemble.summary(),
        n_atoms=len(ensemble.atomic_numbers),
    )


@dataclass(frozen=True)
class Stage:
    """One stage of the pipeline: the engine's kind and the job function its workers run;
    ``batches`` is how many batches of the molecules one timed round measures (the figures
    are per batch, the round's mean): a descriptors batch takes tens of milliseconds, too
    short a round to time on a shared machine."""

    name: str
    kind: str
    job_function: Callable[[Job], MoleculeResult]
    batches: int = 1


STAGES = (
    Stage("descriptors", "descriptors", measure_job, batches=10),
    Stage("conformers", "xtb", conformers_job),
    Stage("xtb", "xtb", measure_job),
)


@dataclass
class StageTimes:
    """Seconds per round of each way, the workers' CPU-seconds in each recompute round,
    and each engine's worker start-up (s)."""

    serial: list[float]
    parallel: list[float]
    cached: list[float]
    startup_serial: float
    startup_parallel: float
    serial_cpu: list[float] = field(default_factory=list)
    parallel_cpu: list[float] = field(default_factory=list)
    #: seconds of the caller's screening of every SMILES, right after each cached round
    screening: list[float] = field(default_factory=list)
    #: seconds of the plain loop a user would write instead: RDKit and the same job
    #: function in the calling process, one molecule after another (no workers, no cache)
    in_process: list[float] = field(default_factory=list)
    #: per round, two processes' plain loops: one alone, and both at once, as seconds
    #: from the first start to the last end (:class:`PlainLoops`; empty if not measured)
    loop_alone: list[float] = field(default_factory=list)
    loop_pair: list[float] = field(default_factory=list)


def plain_loop(smiles: list[str], stage: Stage) -> tuple[float, float, list]:
    """The plain loop (screen, then the job, one molecule after another, in this process):
    its start and end on the monotonic clock, which processes share, and the values."""
    settings = MoleculeSettings()
    start = time.monotonic()
    plain = [
        stage.job_function(Job(screen_one(s, settings.limits).canonical, stage.kind, settings))
        for s in smiles
    ]
    end = time.monotonic()
    return start, end, [r.values for r in plain]


def _serve_plain_loop(conn, smiles: list[str], stage: Stage) -> None:
    """A ceiling process: run :func:`plain_loop` once to warm up, then once per ``go``."""
    plain_loop(smiles, stage)
    conn.send("up")
    while conn.recv() == "go":
        conn.send(plain_loop(smiles, stage))


class PlainLoops:
    """Two processes, each with its own plain loop (no messages while a loop runs): the
    machine's ceiling for two processes, one loop alone against both at once."""

    def __init__(self, smiles: list[str], stage: Stage) -> None:
        context = multiprocessing.get_context("spawn")  # nothing inherited, as the workers
        self.conns, self.processes = [], []
        for _ in range(2):
            parent, child = context.Pipe()
            process = context.Process(target=_serve_plain_loop, args=(child, smiles, stage))
            process.start()
            child.close()
            self.conns.append(parent)
            self.processes.append(process)
        for conn in self.conns:
            check(conn.recv() == "up", "a plain-loop process did not start")

    def run(self, which: list[int]) -> tuple[float, list[list]]:
        """Start the loops of ``which`` at once: seconds from the first start to the last
        end, and each loop's values."""
        for i in which:
            self.conns[i].send("go")
        runs = [self.conns[i].recv() for i in which]
        return max(r[1] for r in runs) - min(r[0] for r in runs), [r[2] for r in runs]

    def close(self) -> None:
        for conn, process in zip(self.conns, self.processes):
            conn.send("stop")
            process.join(10.0)
            if process.exitcode is None:
                process.kill()


def check(condition: bool, message: str) -> None:
    """Stop the benchmark: its figures would compare different results (not an
    ``assert``, which ``python -O`` drops)."""
    if not condition:
        raise RuntimeError(message)


def timed(engine: MoleculeEngine, smiles: list[str], kind: str) -> tuple[float, list]:
    start = time.perf_counter()
    results = engine.measure(smiles, kind)
    return time.perf_counter() - start, results


def worker_cpu_s(engine: MoleculeEngine) -> tuple[tuple[int, ...], float]:
    """The engine's idle worker pids and their CPU-seconds so far (user + system, from
    ``/proc``; NaN where there is no ``/proc``)."""
    pids = tuple(sorted(engine.pool.worker_pids()))
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            return pids, float("nan")
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return pids, total


def start_workers(engine: MoleculeEngine, kind: str) -> float:
    """Seconds to start the engine's workers: one warm-up molecule per worker."""
    seconds, results = timed(engine, WARM_UP[: engine.pool.n_workers], kind)
    check(all(r.ok for r in results), f"warm-up failed: {[r.reason for r in results]}")
    engine.clear_cache()
    return seconds


def run_stage(stage: Stage, smiles: list[str], rounds: int, ceiling: bool) -> StageTimes:
    """Time one stage serial, parallel and cached, and with ``ceiling`` two processes'
    plain loops alone and together; check every result against serial's."""
    serial = MoleculeEngine(n_workers=1, job_function=stage.job_function)
    parallel = MoleculeEngine(n_workers=2, job_function=stage.job_function)
    batches = stage.batches
    loops = PlainLoops(smiles * batches, stage) if ceiling else None
    try:
        times = StageTimes([], [], [], start_workers(serial, stage.kind), 0.0)
        times.startup_parallel = start_workers(parallel, stage.kind)
        reference = None
        limits, settings = serial.settings.limits, serial.settings
        plain_loop(WARM_UP, stage)  # this process's RDKit and SA table loaded, untimed
        ways = [
            (serial, times.serial, times.serial_cpu),
            (parallel, times.parallel, times.parallel_cpu),
        ]
        for _ in range(rounds):
            # each way's seconds and worker CPU per batch, the mean over the round's batches,
            # the ways alternating batch by batch
            elapsed, spent = [0.0] * len(ways), [0.0] * len(ways)
            for _ in range(batches):
                for k, (engine, _, _) in enumerate(ways):
                    engine.clear_cache()  # every batch a recompute (not timed)
                    pids, cpu_before = worker_cpu_s(engine)
                    batch_s, results = timed(engine, smiles, stage.kind)
                    pids_after, cpu_after = worker_cpu_s(engine)
                    elapsed[k] += batch_s
                    same = pids == pids_after  # a replaced worker's CPU time is lost
                    spent[k] += cpu_after - cpu_before if same else float("nan")
                    if reference is None:
                        failed = [f"{r.smiles}: {r.reason}" for r in results if not r.ok]
                        check(not failed, f"{stage.name}: not measured: {failed}")
                        reference = results
                    check(
                        results == reference,
                        f"{stage.name}: {engine.pool.n_workers} worker(s) measured other "
                        "values than the first serial batch",
                    )
            for (_, seconds, cpu), way_s, way_cpu in zip(ways, elapsed, spent):
                seconds.append(way_s / batches)
                cpu.append(way_cpu / batches)
            computed = serial.computed
            elapsed = 0.0
            for _ in range(batches):
                batch_s, results = timed(serial, smiles, stage.kind)
                elapsed += batch_s
                check(results == reference, f"{stage.name}: cached results differ from computed")
            times.cached.append(elapsed / batches)
            check(serial.computed == computed, f"{stage.name}: a cached round computed")
            start = time.perf_counter()
            for _ in range(batches):
                for s in smiles:
                    serial.screen(s)
            times.screening.append((time.perf_counter() - start) / batches)
            start = time.perf_counter()
            for _ in range(batches):
                plain = [
                    stage.job_function(Job(screen_one(s, limits).canonical, stage.kind, settings))
                    for s in smiles
                ]
            times.in_process.append((time.perf_counter() - start) / batches)
            check(
                [r.values for r in plain] == [r.values for r in reference],
                f"{stage.name}: the in-process loop measured other values than the engine",
            )
            if loops is not None:  # one loop alone (each in turn), then both at once
                alone, values = loops.run([len(times.loop_alone) % 2])
                pair, values_pair = loops.run([0, 1])
                times.loop_alone.append(alone / batches)
                times.loop_pair.append(pair / batches)
                check(
                    all(v == [r.values for r in reference] * batches for v in values + values_pair),
                    f"{stage.name}: a plain-loop process measured other values than the engine",
                )
        return times
    finally:
        serial.close()
        parallel.close()
        if loops is not None:
            loops.close()


def rate(n: int, seconds: list[float]) -> str:
    """Molecules/s as ``median (min-max)`` over rounds."""
    rates = sorted(n / s for s in seconds)
    return f"{statistics.median(rates):,.1f} ({rates[0]:,.1f}-{rates[-1]:,.1f})"


def cores(cpu_s: list[float], wall_s: list[float]) -> str:
    """Median over rounds of the workers' CPU-seconds per wall-second: how many cores the
    workers had (2 workers on an idle 2-core machine: about 2)."""
    return f"{statistics.median(c / w for c, w in zip(cpu_s, wall_s)):.2f}"


def ceiling(t: StageTimes) -> str:
    """Two plain loops' aggregate throughput over one loop's alone, from the median
    seconds of each ("-" where not measured)."""
    if not t.loop_pair:
        return "-"
    return f"{2 * statistics.median(t.loop_alone) / statistics.median(t.loop_pair):.2f}x"


def ceiling_range(t: StageTimes) -> str:
    """The ceiling of each round, lowest to highest."""
    rounds = sorted(2 * a / p for a, p in zip(t.loop_alone, t.loop_pair))
    return f"{rounds[0]:.2f}-{rounds[-1]:.2f}x"


def verdict(met: bool) -> str:
    return "met" if met else "NOT met"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds of each way")
    parser.add_argument(
        "--molecules", type=int, default=len(DRUGS), help="the first N molecules of DRUGS"
    )
    parser.add_argument(
        "--stages",
        nargs="+",
        choices=[stage.name for stage in STAGES],
        default=[stage.name for stage in STAGES],
        help="the stages to time (default: all three; descriptors alone takes seconds)",
    )
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, seconds")
    add_markdown_option(parser)
    args = parser.parse_args()
    if args.smoke:
        args.molecules, args.rounds = 4, 1
    with markdown_section(
        args.markdown,
        "Molecules per second through the molecule engine: 1 worker, 2 workers and the cache",
    ):
        _run(args)


def _run(args: argparse.Namespace) -> None:
    smiles = [s for _, s in DRUGS[: args.molecules]]
    n = len(smiles)
    load_before = os.getloadavg()
    start = time.perf_counter()
    stages = [stage for stage in STAGES if stage.name in args.stages]
    results = {
        stage.name: run_stage(stage, smiles, args.rounds, ceiling=stage.name == "descriptors")
        for stage in stages
    }
    total = time.perf_counter() - start
    load_after = os.getloadavg()

    print(
        f"{n} drugs, {args.rounds} rounds, {total:.0f} s in all; load average (1, 5, 15 min) "
        f"{', '.join(f'{x:.2f}' for x in load_before)} before, "
        f"{', '.join(f'{x:.2f}' for x in load_after)} after, on {os.cpu_count()} cores"
    )
    print()
    print(
        "Each stage, side by side in this one run: the engine with 1 worker process "
        "(serial) and with 2 (parallel), recompute rounds with the cache cleared, serial "
        "and parallel alternating batch by batch; the serial engine again on the same "
        "molecules (cached, every one a hit); the plain loop a user would write (RDKit and "
        "the same job function in this process); and, for descriptors, the ceiling: that "
        "plain loop in two processes started before the rounds, one alone and both at once "
        "in every round, the pair's throughput over one alone. Molecules per second as "
        f"median (min-max) over {args.rounds} round(s), a round's figure the mean of its "
        f"batches of the {n} molecules ("
        + ", ".join(f"{stage.name} {stage.batches}" for stage in stages)
        + " a round, the cache cleared before each recompute batch); every worker and loop "
        "runs one thread (OMP_NUM_THREADS=1)."
    )
    print()
    print(
        "| stage | serial, 1 worker (mol/s) | parallel, 2 workers (mol/s) | cached (mol/s) "
        "| parallel / serial | recompute / cached | cores used, 1 / 2 workers "
        "| worker start-up, 1 / 2 (s) | plain loop in process (mol/s) | 2 workers / plain loop "
        "| ceiling: 2 plain loops / 1 |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, t in results.items():
        serial_s = statistics.median(t.serial)
        speed_up = serial_s / statistics.median(t.parallel)
        cache_gain = serial_s / statistics.median(t.cached)
        print(
            f"| {name} | {rate(n, t.serial)} | {rate(n, t.parallel)} | {rate(n, t.cached)} "
            f"| {speed_up:.2f}x | {cache_gain:,.0f}x "
            f"| {cores(t.serial_cpu, t.serial)} / {cores(t.parallel_cpu, t.parallel)} "
            f"| {t.startup_serial:.2f} / {t.startup_parallel:.2f} "
            f"| {rate(n, t.in_process)} "
            f"| {statistics.median(t.in_process) / statistics.median(t.parallel):.2f}x "
            f"| {ceiling(t)} |"
        )
    print()
    wall = {name: statistics.median(t.serial) / n for name, t in results.items()}
    cpu = {name: statistics.median(t.serial_cpu) / n for name, t in results.items()}
    xtb_only = (
        f"; the GFN2-xTB single point alone about "
        f"{cpu['xtb'] - cpu['conformers'] - cpu['descriptors']:.3f} CPU-s (xtb minus the"
        " other two)"
        if len(cpu) == len(STAGES)
        else ""
    )
    print(
        "Serial, per molecule, wall / worker CPU: "
        + ", ".join(f"{name} {wall[name]:.4f} / {cpu[name]:.4f} s" for name in wall)
        + f"{xtb_only}."
    )
    for name, t in results.items():
        pairs = sorted(s / p for s, p in zip(t.serial, t.parallel))
        machine = (
            f"; the machine's ceiling {ceiling(t)} (rounds {ceiling_range(t)}): two plain loops"
            " at once over one alone"
            if t.loop_pair
            else ""
        )
        speed_up = statistics.median(t.serial) / statistics.median(t.parallel)
        cache_gain = statistics.median(t.serial) / statistics.median(t.cached)
        print(
            f"- {name}: parallel/serial {speed_up:.2f}x (round pairs {pairs[0]:.2f}-"
            f"{pairs[-1]:.2f}x; aim {PARALLEL_AIM}x: {verdict(speed_up >= PARALLEL_AIM)}), "
            f"recompute/cached {cache_gain:,.0f}x (aim {CACHE_AIM:,.0f}x: "
            f"{verdict(cache_gain >= CACHE_AIM)}); worker CPU per molecule "
            f"{statistics.median(t.serial_cpu) / n * 1e3:.1f} ms on 1 worker, "
            f"{statistics.median(t.parallel_cpu) / n * 1e3:.1f} ms on 2; a cache hit "
            f"{statistics.median(t.cached) / n * 1e6:.1f} µs, screening alone (parse, "
            f"canonicalise, check) {statistics.median(t.screening) / n * 1e3:.2f} ms{machine}"
        )
    print("Parallel, cached and repeated rounds equal the first serial round exactly.")
    print()
    print("Reading. " + " ".join(reading(name, t) for name, t in results.items()))


def reading(name: str, t: StageTimes) -> str:
    """One stage's figures in a sentence: the speed-up against its aim and the machine's
    ceiling, and the cache's gain."""
    speed_up = statistics.median(t.serial) / statistics.median(t.parallel)
    cache_gain = statistics.median(t.serial) / statistics.median(t.cached)
    machine = (
        f", where two plain loops at once reached {ceiling(t)} the throughput of one alone "
        "in the same rounds"
        if t.loop_pair
        else ""
    )
    return (
        f"{name}: two workers measure {speed_up:.2f}x the molecules per second of one "
        f"(aim {PARALLEL_AIM}x: {verdict(speed_up >= PARALLEL_AIM)}){machine}; a cache hit "
        f"is {cache_gain:,.0f}x faster than a recompute (aim {CACHE_AIM:,.0f}x: "
        f"{verdict(cache_gain >= CACHE_AIM)})."
    )


if __name__ == "__main__":
    main()
