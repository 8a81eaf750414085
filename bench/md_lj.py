"""LJ molecular dynamics on CPU: labtwin's batched Warp engine vs LAMMPS, OpenMM, TorchSim
and ASE, side by side in one run.

Periodic LJ fluid boxes in reduced units (rho* = 0.8, T* = 1 from a jittered lattice,
truncated at 2.5 sigma or half the box edge, dt = 0.005 tau, neighbour skin 0.3 sigma), plain
NVE velocity Verlet in every engine, on three workloads: many boxes of 256 atoms, fewer of
2,048 and very many of 64.

- labtwin ``WarpLJ``: all systems of the workload in one batch (float32, one core: Warp's CPU
  launches are serial);
- LAMMPS ``pair_style lj/cut``, one box per LAMMPS instance, 1 thread (float64);
- OpenMM CPU platform, one Context per system, at 1 and at 2 threads (``Threads``; single
  precision forces);
- TorchSim ``LennardJonesModel`` + ``nve``, a batch of systems (float32, 1 torch thread);
- ASE ``LennardJones`` + ``VelocityVerlet``, one system at a time (float64).

The peers that loop over systems cost the same per atom-step whichever system they run, so
they are timed on the first few systems (``--looped-systems``; TorchSim and ASE, much slower,
on ``--slow-systems`` for ``--slow-steps``). Every figure is atom-steps per second, the median
of ``--rounds`` timed rounds after a warm-up, every contender set up first and then their rounds
alternating (a drift of a shared machine's speed reaches them alike); the ratio is labtwin's
figure over the peer's.

    python bench/md_lj.py --smoke                 # seconds
    python bench/md_lj.py                         # 64 x 256, 16 x 2048, 1024 x 64 on CPU
    python bench/md_lj.py --device cuda --workloads 1024x256 --steps 1000 --openmm-platform CUDA
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _peers import PeerMissing, load_ase, load_lammps, load_openmm, load_torch_sim  # noqa: E402
from _report import add_markdown_option, write_section  # noqa: E402

from labtwin.simulators.md.build import lj_fluid  # noqa: E402
from labtwin.simulators.md.lj_warp import DEFAULT_SKIN, WarpLJ, default_device  # noqa: E402
from labtwin.simulators.md.state import MDState  # noqa: E402

DENSITY = 0.8
TEMPERATURE = 1.0
CUTOFF = 2.5
DT = 0.005


@dataclass
class Row:
    workload: str
    engine: str
    systems: int  # systems timed
    threads: str
    precision: str
    rates: list[float] = field(default_factory=list)  # atom-steps/s per round
    missing: str | None = None

    @property
    def rate(self) -> float:
        return statistics.median(self.rates) if self.rates else float("nan")


@dataclass
class Timed:
    """A contender set up and warmed up: ``one()`` runs a round and returns its seconds, of
    ``atom_steps`` atom-steps; ``close`` releases what it holds. The driver alternates the
    contenders' rounds, so that a drift of the machine's speed reaches them all alike."""

    one: Callable[[], float]
    atom_steps: int
    close: Callable[[], None] = lambda: None


# ---------------------------------------------------------------------- contenders
def bench_labtwin(state: MDState, cutoff: float, args: argparse.Namespace) -> tuple[Timed, str]:
    engine = WarpLJ(state, cutoff=cutoff, skin=DEFAULT_SKIN, device=args.device)
    engine.set_thermostat(TEMPERATURE, 0.0, DT, seed=0)
    engine.advance(20, DT)  # compile or load kernels, record launches / capture the graph
    wp = engine.wp
    wp.synchronize_device(engine.device)

    def one() -> float:
        start = time.perf_counter()
        engine.advance(args.steps, DT)
        wp.synchronize_device(engine.device)
        return time.perf_counter() - start

    return Timed(one, state.n_atoms * args.steps), engine.device


def bench_lammps(systems: list[MDState], cutoff: float, args: argparse.Namespace) -> Timed:
    lammps = load_lammps()
    boxes = []
    for system in systems:
        lmp = lammps.lammps(cmdargs=["-nocite", "-log", "none", "-screen", "none"])
        edge = [float(x) for x in system.box[0]]
        lmp.commands_string(
            f"""
            units lj
            atom_style atomic
            boundary p p p
            region box block 0 {edge[0]} 0 {edge[1]} 0 {edge[2]}
            create_box 1 box
            mass 1 1.0
            """
        )
        n = system.n_atoms
        x = np.mod(system.positions.astype(np.float64), system.box[0]).ravel().tolist()
        v = system.velocities.astype(np.float64).ravel().tolist()
        lmp.create_atoms(n, list(range(1, n + 1)), [1] * n, x, v)
        lmp.commands_string(
            f"""
            pair_style lj/cut {cutoff}
            pair_coeff 1 1 1.0 1.0 {cutoff}
            neighbor {DEFAULT_SKIN} bin
            neigh_modify every 1 delay 0 check yes
            fix 1 all nve
            timestep {DT}
            run 20
            """
        )
        boxes.append(lmp)

    def one() -> float:
        elapsed = 0.0
        for lmp in boxes:
            start = time.perf_counter()
            lmp.command(f"run {args.steps} pre no post no")
            elapsed += time.perf_counter() - start
        return elapsed

    def close() -> None:
        for lmp in boxes:
            lmp.close()

    return Timed(one, sum(s.n_atoms for s in systems) * args.steps, close)


def bench_openmm(
    systems: list[MDState], cutoff: float, threads: int, args: argparse.Namespace
) -> Timed:
    mm = load_openmm()
    from labtwin.simulators.md.openmm_engine import ARGON, lj_system

    u = ARGON
    platform = mm.Platform.getPlatformByName(args.openmm_platform)
    properties = {"Threads": str(threads)} if args.openmm_platform == "CPU" else {}
    contexts = []
    for system in systems:
        omm_system = lj_system(system.n_atoms, system.box[0], cutoff, u)
        integrator = mm.VerletIntegrator(DT * u.time_ps)
        context = mm.Context(omm_system, integrator, platform, properties)
        context.setPositions(system.positions.astype(np.float64) * u.sigma_nm)
        context.setVelocities(system.velocities.astype(np.float64) * (u.sigma_nm / u.time_ps))
        integrator.step(20)
        contexts.append((context, integrator))

    def one() -> float:
        elapsed = 0.0
        for context, integrator in contexts:
            start = time.perf_counter()
            integrator.step(args.steps)
            context.getState(getEnergy=True)  # waits for the steps (GPU platforms)
            elapsed += time.perf_counter() - start
        return elapsed

    return Timed(one, sum(s.n_atoms for s in systems) * args.steps)


def bench_torch_sim(state: MDState, cutoff: float, args: argparse.Namespace) -> Timed:
    load_torch_sim()
    import torch
    import torch_sim as ts
    from torch_sim.integrators.nve import nve
    from torch_sim.models.lennard_jones import LennardJonesModel

    torch.set_num_threads(1)
    device = torch.device("cuda" if args.device == "cuda" else "cpu")
    dtype = torch.float32
    cell = torch.diag_embed(torch.as_tensor(state.box, dtype=dtype)).to(device)
    sim_state = ts.SimState(
        positions=torch.as_tensor(state.positions, dtype=dtype, device=device),
        masses=torch.as_tensor(state.masses, dtype=dtype, device=device),
        cell=cell,
        pbc=True,
        atomic_numbers=torch.full((state.n_atoms,), 18, dtype=torch.int64, device=device),
        system_idx=torch.as_tensor(state.system_idx, dtype=torch.int64, device=device),
    )
    model = LennardJonesModel(
        sigma=1.0, epsilon=1.0, cutoff=cutoff, device=device, dtype=dtype, use_neighbor_list=True
    )
    dt = torch.tensor(DT, dtype=dtype, device=device)
    kt = torch.tensor(TEMPERATURE, dtype=dtype, device=device)
    init, update = nve(model, dt=dt, kT=kt, seed=0)
    md_state = init(sim_state)
    md_state = update(md_state)

    def one() -> float:
        nonlocal md_state
        start = time.perf_counter()
        for _ in range(args.slow_steps):
            md_state = update(md_state)
        if device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - start

    return Timed(one, state.n_atoms * args.slow_steps)


def bench_ase(systems: list[MDState], cutoff: float, args: argparse.Namespace) -> Timed:
    load_ase()
    from ase import Atoms
    from ase.calculators.lj import LennardJones
    from ase.md.verlet import VelocityVerlet

    # ASE units: Angstrom, eV, amu; with sigma = 1 A, epsilon = 1 eV and m = 1 amu the
    # reduced time unit is ASE's internal time unit, so dt maps directly.
    runs = []
    for system in systems:
        atoms = Atoms(
            "Ar" * system.n_atoms,
            positions=system.positions.astype(np.float64),
            cell=system.box[0].astype(np.float64),
            pbc=True,
        )
        atoms.set_masses(np.ones(system.n_atoms))
        atoms.set_velocities(system.velocities.astype(np.float64))
        atoms.calc = LennardJones(sigma=1.0, epsilon=1.0, rc=cutoff, smooth=False)
        dynamics = VelocityVerlet(atoms, timestep=DT)
        dynamics.run(2)  # neighbour list set-up
        runs.append(dynamics)

    def one() -> float:
        elapsed = 0.0
        for dynamics in runs:
            start = time.perf_counter()
            dynamics.run(args.slow_steps)
            elapsed += time.perf_counter() - start
        return elapsed

    return Timed(one, sum(s.n_atoms for s in systems) * args.slow_steps)


# ---------------------------------------------------------------------- driver
def run_workload(n_systems: int, n_atoms: int, args: argparse.Namespace) -> list[Row]:
    name = f"{n_systems} x {n_atoms}"
    state = lj_fluid(n_atoms, DENSITY, TEMPERATURE, n_systems=n_systems, seed=0)
    edge = float(state.box[0].min())
    cutoff = min(CUTOFF, edge / 2)
    looped = [state.select(k) for k in range(min(args.looped_systems, n_systems))]
    slow = min(args.slow_systems, n_systems)
    print(
        f"\n{name}: box {edge:.2f} sigma, cutoff {cutoff:.2f} sigma; looped peers on "
        f"{len(looped)} systems, TorchSim and ASE on {slow} for {args.slow_steps} steps"
    )
    ours, device = bench_labtwin(state, cutoff, args)
    rows = [Row(name, f"labtwin WarpLJ ({device}), batched", n_systems, "1", "float32")]
    contenders = [(rows[0], ours)]
    omm = args.openmm_platform
    peers: list[tuple[str, int, str, str, Callable[[], Timed]]] = [
        (
            "LAMMPS lj/cut, a box each",
            len(looped),
            "1",
            "float64",
            lambda: bench_lammps(looped, cutoff, args),
        ),
    ]
    for threads in (1, 2) if omm == "CPU" else (0,):
        peers.append(
            (
                f"OpenMM {omm}, a Context each",
                len(looped),
                str(threads) if threads else "-",
                "single (forces)",
                lambda t=threads: bench_openmm(looped, cutoff, t, args),
            )
        )
    peers += [
        (
            "TorchSim LennardJonesModel + nve, batched",
            slow,
            "1",
            "float32",
            lambda: bench_torch_sim(state.select(list(range(slow))), cutoff, args),
        ),
        (
            "ASE LennardJones + VelocityVerlet, a box each",
            slow,
            "1",
            "float64",
            lambda: bench_ase(looped[:slow] or [state.select(0)], cutoff, args),
        ),
    ]
    for engine, timed, threads, precision, set_up in peers:
        if engine.split()[0].lower() not in args.peers:
            continue
        row = Row(name, engine, timed, threads, precision)
        try:
            contenders.append((row, set_up()))
        except PeerMissing as missing:
            row.missing = str(missing)
            print(f"  {engine}: skipped, {missing}")
        rows.append(row)
    try:
        for _ in range(args.rounds):  # the contenders' rounds alternate
            for row, contender in contenders:
                row.rates.append(contender.atom_steps / contender.one())
    finally:
        for _, contender in contenders:
            contender.close()
    for row in rows:
        print(f"  {row.engine:48s} {row.rate:14,.0f} atom-steps/s")
    return rows


def table(rows: list[Row]) -> str:
    lines = [
        "| workload | engine | systems timed | threads | precision | atom-steps/s "
        "| labtwin / engine |",
        "| --- | --- | ---: | ---: | --- | ---: | ---: |",
    ]
    ours = {r.workload: r.rate for r in rows if r.engine.startswith("labtwin")}
    for r in rows:
        if r.missing:
            lines.append(f"| {r.workload} | {r.engine} | - | - | - | missing | - |")
            continue
        ratio = ours[r.workload] / r.rate
        lines.append(
            f"| {r.workload} | {r.engine} | {r.systems} | {r.threads} | {r.precision} "
            f"| {r.rate:,.0f} | {ratio:.2f}x |"
        )
    return "\n".join(lines)


def reading(rows: list[Row]) -> str:
    parts = []
    for workload in dict.fromkeys(r.workload for r in rows):
        mine = [r for r in rows if r.workload == workload]
        ours = mine[0].rate
        ratios = [
            f"{ours / r.rate:.2f}x {r.engine.split(',')[0]}"
            + (
                f" ({r.threads} thread{'s' if r.threads != '1' else ''})"
                if "OpenMM" in r.engine
                else ""
            )
            for r in mine[1:]
            if not r.missing
        ]
        parts.append(f"{workload}: labtwin {ours / 1e6:.2f}M atom-steps/s, " + ", ".join(ratios))
    return (
        "Reading. "
        + "; ".join(parts)
        + ". labtwin runs on one core (half neighbour lists with Newton's third law, serial "
        "Warp launches); LAMMPS is the single-thread reference per atom; OpenMM at 2 threads "
        "uses both cores of a 2-core machine. Figures on a shared machine move with its load "
        "(stated above); ratios within one run are the comparison."
    )


def parse_workloads(text: str) -> list[tuple[int, int]]:
    out = []
    for item in text.split(","):
        systems, atoms = item.lower().split("x")
        out.append((int(systems), int(atoms)))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--workloads",
        default="64x256,16x2048,1024x64",
        help="comma-separated SYSTEMSxATOMS (atoms per box)",
    )
    parser.add_argument("--steps", type=int, default=200, help="NVE steps per timed round")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds (median reported)")
    parser.add_argument("--looped-systems", type=int, default=4, help="systems LAMMPS/OpenMM run")
    parser.add_argument("--slow-systems", type=int, default=1, help="systems TorchSim/ASE run")
    parser.add_argument("--slow-steps", type=int, default=20, help="steps a TorchSim/ASE round")
    parser.add_argument(
        "--peers",
        default="lammps,openmm,torchsim,ase",
        help="comma-separated peers to run (lammps, openmm, torchsim, ase)",
    )
    parser.add_argument("--device", default=None, help="Warp device (default: cuda if present)")
    parser.add_argument("--openmm-platform", default="CPU", help="CPU (1 and 2 threads) or CUDA")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, runs in seconds")
    add_markdown_option(parser)
    args = parser.parse_args(argv)
    if args.smoke:
        args.workloads, args.steps, args.slow_steps = "4x108,64x32", 20, 3
        args.looped_systems, args.slow_systems = 2, 1
    args.peers = [p.strip().lower() for p in args.peers.split(",")]
    args.device = args.device or default_device()
    load = os.getloadavg()
    print(
        f"LJ NVE, rho* = {DENSITY}, T* = {TEMPERATURE}, dt = {DT}, skin {DEFAULT_SKIN}, "
        f"{args.steps} steps a round ({args.slow_steps} for TorchSim and ASE), "
        f"{args.rounds} rounds; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
        f"on {os.cpu_count()} cores"
    )
    rows: list[Row] = []
    for n_systems, n_atoms in parse_workloads(args.workloads):
        rows += run_workload(n_systems, n_atoms, args)
    after = os.getloadavg()
    text = table(rows)
    print()
    print(text)
    about = (
        f"Periodic LJ fluid boxes (rho* = {DENSITY}, T* = {TEMPERATURE}, cutoff "
        f"{CUTOFF} sigma or half the box edge, truncated, skin {DEFAULT_SKIN}, dt = {DT}), NVE "
        "velocity Verlet in every engine, side by side in one run. labtwin runs every system of "
        "a workload in one batch on one core; LAMMPS (1 thread) and OpenMM (CPU platform, 1 "
        "and 2 threads) run one box per instance/Context on the first systems, TorchSim "
        "(batched, 1 torch thread) and ASE on fewer systems and steps. Atom-steps per second, "
        f"median of {args.rounds} timed rounds after a warm-up, the contenders' rounds "
        "alternating (each contender set up first), so that a drift of the machine's speed "
        "reaches them alike; the ratio is labtwin over the engine. Load average "
        f"{load[0]:.2f} before and {after[0]:.2f} after, "
        f"{os.cpu_count()} cores."
    )
    print()
    print(reading(rows))
    write_section(
        args.markdown,
        "LJ molecular dynamics on CPU: labtwin vs LAMMPS, OpenMM, TorchSim and ASE",
        f"{about}\n\n{text}\n\n{reading(rows)}",
    )


if __name__ == "__main__":
    main()
