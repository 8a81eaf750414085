"""The alloy lab's reference hull: the shipped table (``simulators/materials/data/
alloy_hull.csv``, the lowest relaxed cell at each composition of every cell the lab can
make for a pair) against the lab's design space and fresh relaxations.

Tolerances:

- ``TABLE_ENERGY_EV``: a table entry recomputed is the same cell on the same engine with
  the same fmax; the batched FIRE is deterministic and a cell's result does not depend on
  its batch, so on the table's device (cpu) the energy agrees to the last bit. On another
  device (cuda) round-off moves the point where FIRE stops below fmax = 0.01 eV/Å: an energy
  difference of order fmax^2 / k per atom, about 1e-5 eV/atom (the lab's v0-v1 readings
  moved by up to that much), so 2e-5 eV/atom.
- ``TABLE_LATTICE_A``: likewise the residual stress fmax N / V over B leaves each relaxed
  lattice constant within 1.1e-3 Å of the fixed point (tests/materials/test_alloy_lab.py),
  so two relaxations of one cell within 2.5e-3 Å.
- ``HULL_ARITHMETIC_EV``: pymatgen's hull arithmetic on energies of a few eV per atom in
  float64 (qhull and a linear solve): 1e-9 eV/atom.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from labtwin.simulators.materials.alloy import (
    DESIGN_ORDERING_SEEDS,
    DESIGN_REPEATS,
    REFERENCE_MAX_STEPS,
    AlloySpec,
    design_space,
    fcc_equivalent_lattice_constant,
    measure_alloys,
)
from labtwin.simulators.materials.hull import (
    hull_distance,
    hull_vertices,
    phase_diagram,
    reference_hull,
)
from labtwin.simulators.materials.relax import FMAX_EV_A, relax_many
from labtwin.simulators.materials.structure import ATOMS_PER_CELL, LATTICES
from labtwin.tasks.materials_alloy import PAIRS, AlloyCell, AlloyDesign

TABLE_ENERGY_EV = 2e-5
TABLE_LATTICE_A = 2.5e-3
HULL_ARITHMETIC_EV = 1e-9


def spec_of(pair: str, design: dict) -> AlloySpec:
    host, solute = pair.split("-")
    return AlloySpec(
        host, solute, design["lattice"], design["n_solute"] / design["n_atoms"],
        design["ordering"], design["repeats"], design["ordering_seed"],
    )  # fmt: skip


def test_the_task_knobs_are_the_design_space_the_table_enumerates() -> None:
    """One source: the lab's repeats and ordering-seed knobs take their bounds from the
    design space the reference hull enumerates."""
    fields = AlloyCell.model_json_schema()["properties"]
    assert (fields["repeats"]["minimum"], fields["repeats"]["maximum"]) == (
        min(DESIGN_REPEATS),
        max(DESIGN_REPEATS),
    )
    assert list(DESIGN_REPEATS) == list(range(min(DESIGN_REPEATS), max(DESIGN_REPEATS) + 1))
    assert fields["ordering_seed"]["maximum"] == DESIGN_ORDERING_SEEDS - 1
    assert set(fields["lattice"]["enum"]) == set(LATTICES)


@pytest.mark.parametrize("pair", PAIRS)
def test_the_table_holds_every_composition_the_lab_can_build(pair) -> None:
    """Every offered pair has a reference at every solute fraction n / N of every supercell,
    each the lowest of the cells counted there, and the counts add up to the pair's
    distinct cells; a few bcc cells that do not converge in REFERENCE_MAX_STEPS are left
    out (counted)."""
    host, solute = pair.split("-")
    references = reference_hull(host, solute)
    sizes = {ATOMS_PER_CELL[lat] * r**3 for lat in LATTICES for r in DESIGN_REPEATS}
    fractions = {Fraction(n, size) for size in sizes for n in range(size + 1)}
    got = [Fraction(r.composition.get(solute, 0), sum(r.composition.values())) for r in references]
    assert got == sorted(fractions)
    cells = sum(r.cells for r in references)
    assert cells == len(design_space(host, solute))
    unconverged = sum(r.unconverged for r in references)
    assert unconverged < 0.01 * cells
    for ref in references:
        assert ref.cells > ref.unconverged


def test_a_sample_of_table_entries_recomputes() -> None:
    """The hull vertices of Cu-Pt and Cu-Pd and 16 other entries drawn at random, rebuilt
    from their knobs and relaxed again: the table's energies and lattice constants
    (module doc's tolerances)."""
    rng = np.random.default_rng(0)
    sample = [("Cu-Pt", r) for r in hull_vertices("Cu", "Pt")]
    sample += [("Cu-Pd", r) for r in hull_vertices("Cu", "Pd")]
    for _ in range(16):
        pair = PAIRS[int(rng.integers(len(PAIRS)))]
        references = reference_hull(*pair.split("-"))
        sample.append((pair, references[int(rng.integers(len(references)))]))
    specs = [spec_of(pair, ref.design) for pair, ref in sample]
    relaxed = relax_many(
        [s.build() for s in specs], "warp", fmax=FMAX_EV_A, max_steps=REFERENCE_MAX_STEPS
    )
    for (pair, ref), spec, result in zip(sample, specs, relaxed, strict=True):
        assert spec.name() == ref.name
        assert result.converged, (ref.name, result.reason)
        assert result.structure.composition() == ref.composition
        assert result.energy_per_atom_eV == pytest.approx(
            ref.energy_per_atom_eV, abs=TABLE_ENERGY_EV
        ), (pair, ref.name)
        assert fcc_equivalent_lattice_constant(result.structure.volume_per_atom) == pytest.approx(
            fcc_equivalent_lattice_constant(ref.volume_per_atom_A3), abs=TABLE_LATTICE_A
        ), (pair, ref.name)


def test_every_reference_and_every_sampled_lab_cell_lies_on_or_above_the_hull() -> None:
    """Every reference of every pair reads E_hull >= 0 on its own hull, the same against the
    hull's vertices alone (what measurements are placed on), and no cell the lab builds lies
    below it: v1's four classic cells of every pair (L1_2 A3B,
    L1_0 AB, L1_2 AB3, B2 AB) and 40 random experiments of the lab, measured, sit at a
    signed distance of at least -TABLE_ENERGY_EV from the hull of the references alone."""
    for pair in PAIRS:
        host, solute = pair.split("-")
        diagram, _ = phase_diagram(reference_hull(host, solute))
        vertices = hull_vertices(host, solute)
        for ref in reference_hull(host, solute):
            (entry,) = (e for e in diagram.all_entries if e.name == ref.name)
            e_hull = diagram.get_e_above_hull(entry)
            assert e_hull >= 0.0, (pair, ref.name)
            # the vertices alone give every reference the same E_hull as the whole set
            alone = hull_distance(vertices, ref.composition, ref.energy_per_atom_eV)
            assert alone == pytest.approx(e_hull, abs=HULL_ARITHMETIC_EV), (pair, ref.name)
    classic = [
        AlloySpec(*pair.split("-"), lattice, fraction, "ordered", 1)  # type: ignore[arg-type]
        for pair in PAIRS
        for lattice, fraction in (("fcc", 0.25), ("fcc", 0.5), ("fcc", 0.75), ("bcc", 0.5))
    ]
    task = AlloyDesign()
    rng = np.random.default_rng(0)
    drawn = [task.spec_of(task.random_experiment(rng)) for _ in range(40)]
    measured = measure_alloys(classic + drawn, "warp", max_steps=task.max_relax_steps)
    assert sum(r.status == "ok" for r in measured) >= len(measured) - 2
    for spec, result in zip(classic + drawn, measured, strict=True):
        if result.status != "ok":
            continue
        references = reference_hull(spec.host, spec.solute)
        composition = result.structure.composition()  # type: ignore[union-attr]
        distance = hull_distance(references, composition, result.energy_per_atom_eV)
        assert distance >= -TABLE_ENERGY_EV, (spec, distance)
        assert result.e_above_hull_eV_atom == pytest.approx(max(distance, 0.0), abs=1e-9)
