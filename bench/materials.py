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
- **alloy**: AlloyDesign-v2's experiments (``--alloys`` of the lab's random experiments:
  2-108-atom fcc, bcc and hcp supercells, ordered or random): build, relax atoms and cell to
  0.01 eV/Å, seven-point equation of state, hull placement. labtwin: one
  :func:`~labtwin.simulators.materials.alloy.measure_alloys` call on the batched engine (the
  lab's hot path); AlloyDesign-v0's path, the same function with asap3 or ASE's EMT and
  ASE's FIRE with a UnitCellFilter, one cell after another. Reference hulls are computed
  before timing (the lab caches them per process).

Each timing is the median of ``--repeats`` rounds (3 or more), the engines side by side in
one run, one thread each (Warp's CPU kernels and asap3 are serial; ASE is Python). The
looped engines cost the same per cell whichever cell they run, so they are timed on
subsets (``--ase-cells``, ``--asap-cells``, ``--ase-alloys``) and reported per cell; the
ratios are labtwin's cells per second over the peer's, from the same run.

    python bench/materials.py --smoke            # seconds, CI
    python bench/materials.py                    # 256 cells, CPU-sized
    python bench/materials.py --device cuda --cells 4096
    python bench/materials.py --markdown out.md  # one markdown section for bench/RESULTS.md
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
    alloys: int = 32  # AlloyDesign-v2 random experiments in the alloy job (0 skips it)
    ase_alloys: int = 4  # of those, timed with ASE's EMT (asap3 runs all of them)
    repeats: int = 3  # rounds per engine; the median is reported
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


def median_time(run: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


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
    parser.add_argument("--markdown", default=None, help="write one markdown section here")
    args = parser.parse_args(argv)
    smoke = args.__dict__.pop("smoke")
    markdown = args.__dict__.pop("markdown")
    cfg = Config(**vars(args))
    if smoke:
        cfg.cells, cfg.ase_cells, cfg.asap_cells, cfg.repeats = 16, 2, 4, 1
        cfg.alloys, cfg.ase_alloys = 4, 1
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
        f"median of {cfg.repeats}"
    )
    sections: list[tuple[str, list[tuple[str, int, float, str]]]] = []

    # ---------------------------------------------------------------- evaluate
    emt_evaluate(cells[:4], dtype=dtype, device=cfg.device)  # compile
    warp_full = median_time(
        lambda: emt_evaluate(cells, dtype=dtype, device=cfg.device), cfg.repeats
    )
    engine = WarpEMT(cells, dtype=dtype, device=cfg.device)
    engine.evaluate()
    warp_eval = median_time(engine.evaluate, cfg.repeats)
    rows = [
        (f"labtwin emt_evaluate (batched, {cfg.device}, set-up included)", cfg.cells, warp_full),
        (f"labtwin WarpEMT.evaluate (batched, {cfg.device}, built engine)", cfg.cells, warp_eval),
    ]
    for name, n in (("ase", cfg.ase_cells), ("asap3", cfg.asap_cells)):
        if n:
            subset = cells[:n]
            label = "ASE EMT() (loop)" if name == "ase" else "asap3 EMT() (loop)"
            rows.append(
                (label, n, median_time(lambda s=subset, m=name: evaluate_looped(s, m), cfg.repeats))
            )
    table = Table(title="Energy + forces + stress of every cell (higher is better)")
    for column in ("engine", "cells timed", "cells / s", "labtwin (set-up included) speed-up"):
        table.add_column(column, justify="left" if column == "engine" else "right")
    warp_rate = cfg.cells / warp_full
    for name, n, seconds in rows:
        table.add_row(name, str(n), f"{n / seconds:,.0f}", f"{warp_rate / (n / seconds):.2f}x")
    console.print(table)
    sections.append(("evaluate (energy, forces, stress)", [(*r, "") for r in rows]))

    # ---------------------------------------------------------------- relax
    relax_emt(cells[:4], fmax=cfg.fmax, dtype=dtype, device=cfg.device)  # compile
    result = None

    def warp_relax() -> None:
        nonlocal result
        result = relax_emt(cells, fmax=cfg.fmax, dtype=dtype, device=cfg.device)

    warp_seconds = median_time(warp_relax, cfg.repeats)
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

            seconds = median_time(run, cfg.repeats)
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
    sections.append(
        (f"relax positions (FIRE, {cfg.fmax} eV/Å)", [(r[0], r[1], r[2], r[3]) for r in rows])
    )
    if cfg.alloys:
        sections.append(("AlloyDesign-v2 experiments", alloy_job(cfg, console)))
    if markdown:
        write_markdown(markdown, cfg, smoke, n_atoms, sections)


def alloy_job(cfg: Config, console: Console) -> list[tuple[str, int, float, str]]:
    """AlloyDesign-v2's experiments on the batched engine against v0's looped path."""
    import labtwin
    from labtwin.simulators.materials.alloy import measure_alloys

    task = labtwin.load_task("AlloyDesign-v2", device=cfg.device)
    rng = np.random.default_rng(cfg.seed)
    specs = [task.spec_of(task.random_experiment(rng)) for _ in range(cfg.alloys)]
    atoms = sum(len(s.build()) for s in specs)
    backends = [("warp", cfg.alloys)]
    if cfg.asap_cells:
        backends.append(("asap3", cfg.alloys))
    if cfg.ase_alloys:
        backends.append(("ase", min(cfg.ase_alloys, cfg.alloys)))
    for backend, n in backends:  # reference hulls of every pair in the specs, then compile
        measure_alloys(specs[:n], backend, max_steps=task.max_relax_steps, device=cfg.device)
    rows = []
    for backend, n in backends:
        results: list = []

        def run(b=backend, k=n, out=results) -> None:
            out[:] = measure_alloys(specs[:k], b, max_steps=task.max_relax_steps, device=cfg.device)

        seconds = median_time(run, cfg.repeats)
        steps = np.mean([r.relax_steps for r in results])
        label = {
            "warp": f"labtwin measure_alloys (batched Warp EMT + FIRE, {cfg.device})",
            "asap3": "measure_alloys, ASE FIRE + UnitCellFilter + asap3 EMT (loop)",
            "ase": "measure_alloys, ASE FIRE + UnitCellFilter + ASE EMT (loop)",
        }[backend]
        ok = sum(r.status == "ok" for r in results)
        rows.append((label, n, seconds, f"{steps:.0f} steps, {ok}/{n} ok"))
    table = Table(
        title=f"AlloyDesign-v2 experiments ({cfg.alloys} random, {atoms} atoms; higher is better)"
    )
    for column in ("engine", "experiments timed", "experiments / s", "per cell", "speed-up"):
        table.add_column(column, justify="left" if column == "engine" else "right")
    warp_rate = rows[0][1] / rows[0][2]
    for name, n, seconds, note in rows:
        table.add_row(
            name, str(n), f"{n / seconds:,.1f}", note, f"{warp_rate / (n / seconds):.2f}x"
        )
    console.print(table)
    return rows


def write_markdown(path, cfg: Config, smoke: bool, n_atoms: int, sections) -> None:
    """One section: heading with the command, what is measured, a table, a reading."""
    args = "--smoke" if smoke else f"--cells {cfg.cells} --alloys {cfg.alloys}"
    if cfg.device != default_device():
        args += f" --device {cfg.device}"
    lines = [
        f"## Materials: batched Warp EMT vs ASE and asap3 (`python bench/materials.py {args}`)",
        "",
        f"{cfg.cells} rattled, strained fcc cells of 4-32 atoms ({n_atoms} atoms; alloys and "
        f"vacancies among them) evaluated once and relaxed (positions, FIRE to {cfg.fmax} eV/Å), "
        f"and {cfg.alloys} of AlloyDesign-v2's random experiments measured (build, relax atoms "
        "and cell, seven-point equation of state, hull placement; hulls computed beforehand). "
        f"labtwin runs every cell in one batch on Warp's `{cfg.device}` device ({cfg.dtype}); "
        "ASE's EMT and asap3's compiled EMT run one cell after another (ASE's FIRE, with a "
        "UnitCellFilter for the alloys: AlloyDesign-v0's path), on subsets, rated per cell. "
        f"Median of {cfg.repeats} rounds per engine, side by side in one run, one thread each.",
        "",
        "| job | engine | cells timed | cells / s | labtwin's speed-up |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    readings = []
    for job, rows in sections:
        lab_rate = rows[0][1] / rows[0][2]
        for name, n, seconds, _ in rows:
            rate = n / seconds
            lines.append(f"| {job} | {name} | {n} | {rate:,.1f} | {lab_rate / rate:.2f}x |")
        peers = [
            f"{lab_rate / (n / s):.1f}x {name.split(' (')[0].replace('measure_alloys, ', '')}"
            for name, n, s, _ in rows[1:]
            if not name.startswith("labtwin")
        ]
        readings.append(f"{job}, {' and '.join(peers)}")
    lines += [
        "",
        "Reading. labtwin's batched engine (first row of each job) over the looped peers: "
        + "; ".join(readings)
        + ". The ratios hold for this run's load; rerun on an idle machine for final figures.",
        "",
    ]
    with open(path, "w") as out:
        out.write("\n".join(lines))


if __name__ == "__main__":
    main()
