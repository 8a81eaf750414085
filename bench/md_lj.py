"""Batched LJ molecular dynamics: labtwin's Warp engine vs ASE and OpenMM, side by side.

Many small periodic LJ fluid boxes (reduced units, rho* = 0.8, truncated at 2.5 sigma), plain
NVE velocity Verlet in all three engines:

- labtwin ``WarpLJ``: all systems in one batch, one kernel launch per stage per step;
- ASE ``LennardJones`` calculator + ``VelocityVerlet``, looped over systems;
- OpenMM (CPU platform by default), one Context per system, looped over systems.

The looped engines cost the same per atom-step whichever system they run, so they are timed
on a subset of the systems (``--ase-systems``, ``--openmm-systems``) and reported as atom-steps
per second, like the batch. Prints one table with the ratios.

    python bench/md_lj.py --smoke                     # seconds, CI
    python bench/md_lj.py                             # CPU-sized default
    python bench/md_lj.py --device cuda --systems 1024 --atoms 512 --steps 1000
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np
from rich.console import Console
from rich.table import Table

from labtwin.simulators.md.build import lj_fluid
from labtwin.simulators.md.lj_warp import WarpLJ, default_device
from labtwin.simulators.md.openmm_engine import OpenMMLJ
from labtwin.simulators.md.state import MDState


@dataclass
class Config:
    systems: int = 64  # number of independent LJ boxes
    atoms: int = 256  # atoms per box
    steps: int = 200  # MD steps timed
    density: float = 0.8  # reduced density rho*
    temperature: float = 1.0  # initial T*
    cutoff: float = 2.5  # sigma (capped at half the box edge)
    dt: float = 0.005  # tau
    device: str | None = None  # Warp device (default: cuda if present, else cpu)
    ase_systems: int = 2  # systems timed with ASE (0 skips ASE)
    openmm_systems: int = 4  # systems timed with OpenMM (0 skips OpenMM)
    openmm_platform: str = "CPU"


def bench_warp(state: MDState, cfg: Config, cutoff: float) -> tuple[float, str]:
    engine = WarpLJ(state, cutoff=cutoff, device=cfg.device)
    engine.set_thermostat(cfg.temperature, 0.0, cfg.dt, seed=0)
    engine.advance(10, cfg.dt)  # compile, allocate, record/capture
    engine.wp.synchronize_device(engine.device)
    start = time.perf_counter()
    engine.advance(cfg.steps, cfg.dt)
    engine.wp.synchronize_device(engine.device)
    elapsed = time.perf_counter() - start
    return state.n_atoms * cfg.steps / elapsed, engine.device


def bench_ase(state: MDState, cfg: Config, cutoff: float) -> float:
    from ase import Atoms
    from ase.calculators.lj import LennardJones
    from ase.md.verlet import VelocityVerlet

    # ASE units: Angstrom, eV, amu; with sigma = 1 A, epsilon = 1 eV, m = 1 amu the reduced
    # time unit is ASE's internal time unit, so dt maps directly.
    atom_steps, elapsed = 0, 0.0
    for k in range(cfg.ase_systems):
        system = state.select(k)
        atoms = Atoms(
            "Ar" * system.n_atoms,
            positions=system.positions.astype(np.float64),
            cell=system.box[0].astype(np.float64),
            pbc=True,
        )
        atoms.set_masses(np.ones(system.n_atoms))
        atoms.set_velocities(system.velocities.astype(np.float64))
        atoms.calc = LennardJones(sigma=1.0, epsilon=1.0, rc=cutoff, smooth=False)
        dynamics = VelocityVerlet(atoms, timestep=cfg.dt)
        dynamics.run(2)  # neighbour list set-up
        start = time.perf_counter()
        dynamics.run(cfg.steps)
        elapsed += time.perf_counter() - start
        atom_steps += system.n_atoms * cfg.steps
    return atom_steps / elapsed


def bench_openmm(state: MDState, cfg: Config, cutoff: float) -> float:
    subset = state.select(list(range(cfg.openmm_systems)))
    engine = OpenMMLJ(cutoff=cutoff, platform=cfg.openmm_platform)
    engine.run(subset, 2, dt=cfg.dt, friction=0.0, context_per_system=True)  # build contexts
    start = time.perf_counter()
    engine.run(subset, cfg.steps, dt=cfg.dt, friction=0.0, context_per_system=True)
    elapsed = time.perf_counter() - start
    return subset.n_atoms * cfg.steps / elapsed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    defaults = Config()
    for name, value in vars(defaults).items():
        flag = "--" + name.replace("_", "-")
        kind = type(value) if value is not None else str
        parser.add_argument(flag, type=kind, default=value)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, runs in seconds")
    args = parser.parse_args(argv)
    smoke = args.__dict__.pop("smoke")
    cfg = Config(**vars(args))
    if smoke:
        cfg.systems, cfg.atoms, cfg.steps = 8, 108, 20
        cfg.ase_systems, cfg.openmm_systems = 1, 2
    cfg.ase_systems = min(cfg.ase_systems, cfg.systems)
    cfg.openmm_systems = min(cfg.openmm_systems, cfg.systems)
    cfg.device = cfg.device or default_device()

    state = lj_fluid(cfg.atoms, cfg.density, cfg.temperature, n_systems=cfg.systems, seed=0)
    box = float(state.box[0, 0])
    cutoff = min(cfg.cutoff, box / 2)
    console = Console()
    console.print(
        f"{cfg.systems} systems x {cfg.atoms} atoms, rho*={cfg.density}, box {box:.2f} sigma, "
        f"cutoff {cutoff:.2f} sigma, {cfg.steps} NVE steps of dt={cfg.dt}"
    )

    rows: list[tuple[str, str, int, float]] = []
    rate, device = bench_warp(state, cfg, cutoff)
    rows.append((f"labtwin WarpLJ (batched, {device})", "all", cfg.systems, rate))
    if cfg.ase_systems:
        rows.append(
            (
                "ASE LennardJones + VelocityVerlet (loop)",
                "cpu",
                cfg.ase_systems,
                bench_ase(state, cfg, cutoff),
            )
        )
    if cfg.openmm_systems:
        rows.append(
            (
                f"OpenMM {cfg.openmm_platform}, one Context per system (loop)",
                cfg.openmm_platform.lower(),
                cfg.openmm_systems,
                bench_openmm(state, cfg, cutoff),
            )
        )

    table = Table(title="Batched LJ MD throughput (higher is better)")
    table.add_column("engine")
    table.add_column("systems timed", justify="right")
    table.add_column("atom-steps / s", justify="right")
    table.add_column("labtwin speed-up", justify="right")
    warp_rate = rows[0][3]
    for name, _, n_timed, r in rows:
        table.add_row(name, str(n_timed), f"{r:,.0f}", f"{warp_rate / r:.2f}x")
    console.print(table)


if __name__ == "__main__":
    main()
