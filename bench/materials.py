"""Many small crystals under EMT: labtwin's batched Warp engine vs ASE and asap3, side by side.

The cells: fcc supercells of 4, 8, 16 and 32 atoms (1x1x1 to 2x2x2 conventional cells) of a
random EMT metal, a random share of them alloyed with a second metal, some with a vacancy,
all rattled by 0.05 Å and strained by 1 % (triclinic). Two jobs:

- **evaluate**: energy, forces and stress of every cell once. labtwin: one
  :func:`~labtwin.simulators.materials.emt_warp.emt_evaluate` call for all cells (lists built
  from scratch, host set-up included) and, separately, one more evaluation on the built
  engine; ASE's ``EMT()`` and asap3's ``EMT()`` looped over cells, a fresh calculator each.
- **relax**: positions relaxed with FIRE to 0.01 eV/Å. labtwin: one
  :func:`~labtwin.simulators.materials.emt_warp.relax_emt` call; ASE's FIRE with ASE's EMT
  and with asap3, looped.

Each timing is the best of ``--repeats`` runs (``timeit``'s advice: the minimum is the least
disturbed by other load). The looped engines cost the same per cell whichever cell they run,
so they are timed on subsets (``--ase-cells``, ``--asap-cells``) and reported per cell; the
ratios are labtwin's cells per second over the peer's, from the same run.

    python bench/materials.py --smoke            # seconds, CI
    python bench/materials.py                    # 256 cells, CPU-sized
    python bench/materials.py --device cuda --cells 4096
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from rich.console import Console
from rich.table import Table

from labtwin.simulators.materials.emt_warp import (
    EMT_PARAMETERS,
    WarpEMT,
    default_device,
    emt_evaluate,
    relax_emt,
)

#: room-temperature fcc lattice constants (Å) of the EMT metals
A0 = {"Cu": 3.61, "Al": 4.05, "Ni": 3.52, "Pd": 3.89, "Ag": 4.09, "Pt": 3.92, "Au": 4.08}
REPEATS = ((1, 1, 1), (2, 1, 1), (2, 2, 1), (2, 2, 2))


@dataclass
class Config:
    cells: int = 256  # number of cells in the batch
    fmax: float = 0.01  # FIRE force tolerance, eV/Å
    dtype: str = "float64"  # labtwin engine precision (float64 or float32)
    device: str | None = None  # Warp device (default: cuda if present, else cpu)
    ase_cells: int = 16  # cells timed with ASE's EMT (0 skips ASE)
    asap_cells: int = 64  # cells timed with asap3 (0 skips asap3)
    repeats: int = 3  # timings per engine; the best is reported
    seed: int = 0


def make_cells(n: int, seed: int) -> list:
    """``n`` rattled, strained fcc cells of 4-32 atoms (alloys and vacancies among them)."""
    from ase.build import bulk

    rng = np.random.default_rng(seed)
    metals = list(EMT_PARAMETERS)
    out = []
    for k in range(n):
        host = metals[rng.integers(len(metals))]
        atoms = bulk(host, "fcc", a=A0[host], cubic=True) * REPEATS[k % len(REPEATS)]
        if rng.random() < 0.5:
            solute = metals[rng.integers(len(metals))]
            chosen = rng.choice(
                len(atoms), size=rng.integers(1, len(atoms) // 2 + 1), replace=False
            )
            symbols = atoms.get_chemical_symbols()
            for i in chosen:
                symbols[i] = solute
            atoms.set_chemical_symbols(symbols)
        if len(atoms) >= 16 and rng.random() < 0.3:
            del atoms[int(rng.integers(len(atoms)))]
        strain = np.eye(3) + 0.01 * rng.standard_normal((3, 3))
        atoms.set_cell(atoms.cell[:] @ strain, scale_atoms=True)
        atoms.positions += 0.05 * rng.standard_normal(atoms.positions.shape)
        out.append(atoms)
    return out


def best_time(run: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def ase_calculator(name: str):
    if name == "asap3":
        from asap3 import EMT

        return EMT()
    from ase.calculators.emt import EMT

    return EMT()


def evaluate_looped(cells: list, name: str) -> None:
    for atoms in cells:
        atoms = atoms.copy()
        atoms.calc = ase_calculator(name)
        atoms.get_potential_energy()
        atoms.get_forces()
        atoms.get_stress()


def relax_looped(cells: list, name: str, fmax: float) -> int:
    from ase.optimize import FIRE

    steps = 0
    for atoms in cells:
        atoms = atoms.copy()
        atoms.calc = ase_calculator(name)
        optimizer = FIRE(atoms, logfile=None)
        optimizer.run(fmax=fmax, steps=2000)
        steps += optimizer.nsteps
    return steps


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, value in vars(Config()).items():
        kind = type(value) if value is not None else str
        parser.add_argument("--" + name.replace("_", "-"), type=kind, default=value)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, runs in seconds")
    args = parser.parse_args(argv)
    smoke = args.__dict__.pop("smoke")
    cfg = Config(**vars(args))
    if smoke:
        cfg.cells, cfg.ase_cells, cfg.asap_cells, cfg.repeats = 16, 2, 4, 1
    cfg.device = cfg.device or default_device()
    dtype = {"float64": np.float64, "float32": np.float32}[cfg.dtype]
    try:
        import asap3  # noqa: F401
    except ImportError:
        cfg.asap_cells = 0

    cells = make_cells(cfg.cells, cfg.seed)
    n_atoms = sum(len(a) for a in cells)
    console = Console()
    console.print(
        f"{cfg.cells} cells, {n_atoms} atoms ({min(len(a) for a in cells)}-"
        f"{max(len(a) for a in cells)} per cell), labtwin on {cfg.device} in {cfg.dtype}; "
        f"best of {cfg.repeats}"
    )

    # ---------------------------------------------------------------- evaluate
    emt_evaluate(cells[:4], dtype=dtype, device=cfg.device)  # compile
    warp_full = best_time(lambda: emt_evaluate(cells, dtype=dtype, device=cfg.device), cfg.repeats)
    engine = WarpEMT(cells, dtype=dtype, device=cfg.device)
    engine.evaluate()
    warp_eval = best_time(engine.evaluate, cfg.repeats)
    rows = [
        (f"labtwin emt_evaluate (batched, {cfg.device}, set-up included)", cfg.cells, warp_full),
        (f"labtwin WarpEMT.evaluate (batched, {cfg.device}, built engine)", cfg.cells, warp_eval),
    ]
    for name, n in (("ase", cfg.ase_cells), ("asap3", cfg.asap_cells)):
        if n:
            subset = cells[:n]
            label = "ASE EMT() (loop)" if name == "ase" else "asap3 EMT() (loop)"
            rows.append(
                (label, n, best_time(lambda s=subset, m=name: evaluate_looped(s, m), cfg.repeats))
            )
    table = Table(title="Energy + forces + stress of every cell (higher is better)")
    for column in ("engine", "cells timed", "cells / s", "labtwin (set-up included) speed-up"):
        table.add_column(column, justify="left" if column == "engine" else "right")
    warp_rate = cfg.cells / warp_full
    for name, n, seconds in rows:
        table.add_row(name, str(n), f"{n / seconds:,.0f}", f"{warp_rate / (n / seconds):.2f}x")
    console.print(table)

    # ---------------------------------------------------------------- relax
    relax_emt(cells[:4], fmax=cfg.fmax, dtype=dtype, device=cfg.device)  # compile
    result = None

    def warp_relax() -> None:
        nonlocal result
        result = relax_emt(cells, fmax=cfg.fmax, dtype=dtype, device=cfg.device)

    warp_seconds = best_time(warp_relax, cfg.repeats)
    assert result is not None
    rows = [
        (
            f"labtwin relax_emt (batched FIRE, {cfg.device})",
            cfg.cells,
            warp_seconds,
            f"{result.n_steps.mean():.0f} (batch {result.n_steps.max()})",
            f"{int(result.converged.sum())}/{cfg.cells}",
        )
    ]
    for name, n in (("ase", cfg.ase_cells), ("asap3", cfg.asap_cells)):
        if n:
            subset = cells[:n]
            steps = []

            def run(s=subset, m=name, out=steps) -> None:
                out.append(relax_looped(s, m, cfg.fmax))

            seconds = best_time(run, cfg.repeats)
            label = "ASE FIRE + EMT() (loop)" if name == "ase" else "ASE FIRE + asap3 EMT() (loop)"
            rows.append((label, n, seconds, f"{steps[-1] / n:.0f}", "-"))
    table = Table(title=f"FIRE relaxation of positions to {cfg.fmax} eV/Å (higher is better)")
    for column in ("engine", "cells timed", "cells / s", "steps per cell", "converged", "speed-up"):
        table.add_column(column, justify="left" if column == "engine" else "right")
    warp_rate = cfg.cells / warp_seconds
    for name, n, seconds, steps, converged in rows:
        rate = n / seconds
        table.add_row(name, str(n), f"{rate:,.1f}", steps, converged, f"{warp_rate / rate:.2f}x")
    console.print(table)


if __name__ == "__main__":
    main()
