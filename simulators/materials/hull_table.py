"""Regenerate the shipped reference-hull table (``simulators/materials/data/alloy_hull.csv``).

For each element pair: every distinct cell of the alloy lab's design space
(:func:`~labtwin.simulators.materials.alloy.design_space`: fcc, bcc and hcp supercells
repeated 1-3 times, every solute count, ordered and with each of the 100 ordering seeds)
relaxed with the batched engine (:func:`~labtwin.simulators.materials.alloy.reference_cells`,
fmax as the lab's, up to ``REFERENCE_MAX_STEPS`` steps), and the lowest cell of each
composition kept. About 25,000 cells a pair, 3-14 minutes a pair on one CPU core; pairs run
in parallel worker processes, and the table is rewritten after each pair so a crash loses
only the pairs in flight::

    python -m labtwin.simulators.materials.hull_table --workers 2 \\
        --pairs Cu-Au,Cu-Pd,Cu-Pt,Ni-Pt,Ag-Au,Pd-Pt,Cu-Ag,Cu-Ni

``tests/materials/test_alloy_hull.py`` recomputes a sample of the entries.
"""

from __future__ import annotations

import argparse
import datetime
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from labtwin.simulators.materials.alloy import (
    DESIGN_ORDERING_SEEDS,
    DESIGN_REPEATS,
    REFERENCE_MAX_STEPS,
    design_space,
    reference_cells,
)
from labtwin.simulators.materials.hull import HULL_TABLE, HullReference, write_hull_table
from labtwin.simulators.materials.relax import FMAX_EV_A


def pair_hull(pair: str, device: str | None = None) -> tuple[str, list[HullReference], float]:
    """The reference cells of one pair and the seconds they took."""
    start = time.perf_counter()
    host, solute = pair.split("-")
    specs = design_space(host, solute)
    cells = reference_cells(specs, "warp", device=device)
    return pair, cells, time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", required=True, help="host-solute pairs, comma-separated")
    parser.add_argument("--workers", type=int, default=1, help="worker processes (pairs)")
    parser.add_argument("--device", default=None, help="Warp device (default: cuda if present)")
    default_out = Path(__file__).parent / HULL_TABLE
    parser.add_argument("--out", type=Path, default=default_out, help="the table to write")
    args = parser.parse_args(argv)
    pairs = args.pairs.split(",")
    done: dict[str, list[HullReference]] = {}
    seconds: dict[str, float] = {}
    with ProcessPoolExecutor(args.workers) as pool:
        futures = [pool.submit(pair_hull, pair, args.device) for pair in pairs]
        for future in as_completed(futures):
            pair, cells, took = future.result()
            done[pair], seconds[pair] = cells, took
            n = sum(c.cells for c in cells)
            print(f"{pair}: {n} cells, {len(cells)} compositions, {took:.0f} s", flush=True)
            ordered = {p: done[p] for p in pairs if p in done}
            write_hull_table(args.out, ordered, header(ordered, seconds, args.device))


def header(hulls: dict[str, list[HullReference]], seconds: dict[str, float], device) -> str:
    from labtwin.simulators.materials.emt_warp import default_device
    from labtwin.task import package_versions

    versions = package_versions("warp-lang", "pymatgen")
    timing = ", ".join(
        f"{p} {sum(c.cells for c in cells)} cells {seconds[p]:.0f} s" for p, cells in hulls.items()
    )
    return f"""
The reference hull of the alloy lab (labtwin.simulators.materials.hull): per element pair and
composition, the lowest relaxed cell of the lab's design space (fcc, bcc, hcp supercells
repeated {", ".join(map(str, DESIGN_REPEATS))} times, every solute count, ordered and random with
ordering seeds 0-{DESIGN_ORDERING_SEEDS - 1}; identical occupations once). Batched Warp EMT (asap
cutoff, float64), FIRE on atoms and cell to fmax = {FMAX_EV_A} eV/Å, at most
{REFERENCE_MAX_STEPS} steps; cells: relaxed cells of the composition, unconverged: those
that did not converge (left out).
Regenerate: python -m labtwin.simulators.materials.hull_table --pairs {",".join(hulls)}
Written {datetime.date.today()} on {device or default_device()}, {versions}; {timing}.
"""


if __name__ == "__main__":
    main()
