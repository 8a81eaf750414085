"""Write ``docs/validation.md``: every lab's calibration table, and the LJ lab's bias
against the published equation of state.

    python bench/validation.py                      # all labs (about 15 minutes on 2 cores)
    python bench/validation.py --lab LJEquationOfState-v2 --seeds 64

For every registered lab that declares calibration points, 64 seeds of each point:
spread / mean error bar (calibrated: 0.8-1.25) and mean - reference in standard errors of
the mean (allowed: 4 SEM + the reference's own error). The LJ section adds the lab's
longest runs against the Johnson-Zollweg-Gubbins EOS at 108 atoms and, from plain
``run_lj`` boxes, at 500 atoms, which is how the brief's finite-size statement is measured.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import textwrap
import time
from importlib import metadata
from pathlib import Path

import numpy as np
from _report import cpu_model

import labtwin
from labtwin.calibration import MEAN_SEMS, RATIO_BAND, calibrate_lab, markdown_table
from labtwin.registry import short_id

ROOT = Path(__file__).resolve().parents[1]
LJ = "LJEquationOfState-v2"
#: states for the LJ finite-size table: supercritical and compressed liquid
JZG_STATES = ((1.2, 0.8), (2.0, 0.5), (3.0, 0.6), (3.0, 0.9), (1.5, 0.3))


def lj_finite_size(n_boxes: int = 16, steps: int = 4000) -> str:
    """Mean P* and U*/N of 108- and 500-atom boxes (cutoff 2.45, tail-corrected) against
    JZG: ``n_boxes`` boxes x (1000 + ``steps``) steps per size and state."""
    from labtwin.simulators.md import eos
    from labtwin.simulators.md.build import lj_fluid
    from labtwin.simulators.md.lj_warp import run_lj
    from labtwin.simulators.md.state import MDState

    rows = [
        "| T* | rho* | N | P* (± SEM) | P* JZG | P* bias | U*/N (± SEM) | U*/N JZG | U bias |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for t, rho in JZG_STATES:
        for n in (108, 500):
            state = MDState.concatenate([lj_fluid(n, rho, t, seed=s) for s in range(n_boxes)])
            result = run_lj(
                state,
                steps,
                temperature=t,
                friction=1.0,
                seed=np.arange(n_boxes) + 11,
                sample_every=5,
                n_equilibration=1000,
                cutoff=2.45,
            )
            cells = []
            for name, ref in (
                ("pressure", float(eos.pressure(rho, t))),
                ("potential_energy", float(eos.internal_energy(rho, t))),
            ):
                means = result.series[name].mean(axis=0)
                mean, sem = float(means.mean()), float(means.std(ddof=1) / np.sqrt(n_boxes))
                cells += [
                    f"{mean:.4f} ± {sem:.4f}",
                    f"{ref:.4f}",
                    f"{(mean - ref) / abs(ref):+.1%}",
                ]
            rows.append(f"| {t:g} | {rho:g} | {n} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lab", action="append", help="lab id (default: every lab)")
    parser.add_argument("--seeds", type=int, help="seeds per point (default: the lab's own)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "validation.md")
    parser.add_argument("--no-finite-size", action="store_true")
    args = parser.parse_args()
    # section names are short ids (list_tasks gives labtwin/<id>; the LJ section's extra
    # table is keyed by the short one)
    labs = [short_id(lab) for lab in (args.lab or labtwin.list_tasks())]
    sections = []
    for lab in labs:
        sections.append("")
        task = labtwin.load_task(lab)
        if not task.calibration_points():
            exempt = "; ".join(f"`{k}`: {v}" for k, v in task.calibration_exempt.items())
            sections[-1] = f"## {lab}\n\nNo calibration points. {exempt}\n"
            continue
        start = time.perf_counter()
        results = calibrate_lab(task, n_seeds=args.seeds, progress=True)
        seconds = time.perf_counter() - start
        bad = [p for r in results for p in r.problems()]
        verdict = (
            "all calibrated" if not bad else "**problems**:\n\n" + "\n".join(f"- {p}" for p in bad)
        )
        stamp = (
            f"_Measured {datetime.date.today().isoformat()} on {cpu_model()} "
            f"({os.cpu_count()} cores), {seconds:.0f} s._"
        )
        sections[-1] = f"## {lab}\n\n{stamp}\n\n{markdown_table(results)}\n\n{verdict}\n"
        if lab == LJ and not args.no_finite_size:
            sections[-1] += "\n" + (
                "### LJ boxes against the Johnson-Zollweg-Gubbins EOS\n\n"
                "16 boxes x (1000 + 4000) steps per row, cutoff 2.45 with tail corrections; "
                "the 108-atom rows are the lab's box, the 500-atom rows show how much of the "
                "bias is finite size.\n\n" + lj_finite_size() + "\n"
            )
    versions = ", ".join(
        f"{p} {metadata.version(p)}" for p in ("warp-lang", "openmm", "torch", "pymbar")
    )
    written = textwrap.fill(
        f"Written by `python bench/validation.py`, last on {datetime.date.today().isoformat()} "
        f"for {', '.join(labs) if args.lab else 'every lab'} ({versions}); each lab's section "
        "gives the date and the CPU it was measured on (a run for some labs keeps the others' "
        "sections).",
        91,
        break_on_hyphens=False,
    )
    header = f"""# Validation: calibrated error bars

{written}

For each lab's calibration points (`Task.calibration_points`, spread over the range the lab
offers), 64 seeds of one fixed experiment (256 for the reactors, whose spread is the
instrument's noise draws alone: with 64 the ratio's sampling error of 9 % would fail some
point by chance in one seed stream of twenty). **spread / error bar** is the standard
deviation of the values over the mean reported uncertainty: a calibrated error bar gives 1,
and the criterion is {RATIO_BAND[0]}-{RATIO_BAND[1]}. **deviation** is the mean minus the lab's independent
reference (analytic kinetics, a second engine, the thermostat's set point), in standard
errors of the mean in brackets; the criterion is {MEAN_SEMS:g} SEM plus the reference's
stated error. The same checks run as tests (`tests/tasks/test_calibration_*.py`): CI runs
the reactors' full tables and LJEquationOfState-v2's shortest run (128 seeds), the slow
suite a six-seed gross check of WaterDensity-v2; the MD labs' full tables take 17 and 35
minutes on two cores and are marked `validation` (`python -m pytest -m validation`, or
this page's generator), outside CI's time.
"""
    # one section per lab between markers: a run for some labs keeps the other registered
    # labs' sections, in the page's order; a new version of a lab takes its old one's place
    old = args.out.read_text() if args.out.exists() else ""
    registered = {short_id(lab) for lab in labtwin.list_tasks()}
    page = re.findall(r"<!-- lab:(\S+) -->\n(.*?)<!-- /lab -->\n", old, re.S)
    fresh = dict(zip(labs, sections))
    order: list[str] = []
    for lab, _ in page:
        newer = [n for n in fresh if n.rsplit("-v", 1)[0] == lab.rsplit("-v", 1)[0]]
        order += [n for n in newer if n not in order] if lab not in registered else [lab]
    order += [lab for lab in fresh if lab not in order]
    blocks = dict(page) | fresh
    body = "".join(
        f"<!-- lab:{lab} -->\n{blocks[lab]}<!-- /lab -->\n"
        for lab in dict.fromkeys(order)
        if lab in registered
    )
    args.out.write_text(header + "\n" + body)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
