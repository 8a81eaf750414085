"""Surface energies of fcc EMT slabs (labtwin.simulators.materials.surface): the slab
geometry, the batched Warp EMT against ASE's EMT and ASE's FIRE on the same slabs,
convergence in thickness, the facet ordering, and invalid input.

Tolerances (named once, here):

- slab energies and forces against ASE's EMT, both cutoff conventions: 1e-11 eV/atom and
  1e-11 eV/Å (the same float64 closed form summed in another order; measured 5e-15 eV/atom,
  6e-14 eV/Å);
- relaxed gamma against ASE's FIRE with ASE's EMT on the same slab, both to 1e-4 eV/Å:
  the two stop at different points below fmax, which moves the energy by about
  N fmax^2 / k ~ 1e-7 eV, 1e-8 eV/Å^2 on these cells; asserted at 1e-6 J/m^2 (measured
  2e-9);
- geometry: 1e-9 Å and Å^2 (pymatgen's coordinates pass through fractional coordinates and
  back);
- an unrelaxed slab thicker than the EMT range from each face adds exactly bulk atoms, so
  its gamma is constant to round-off: 1e-10 J/m^2 (measured 6e-14).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from labtwin.simulators.materials.emt_warp import cutoff_parameters, emt_evaluate
from labtwin.simulators.materials.structure import Structure
from labtwin.simulators.materials.surface import (
    EV_PER_A2_IN_J_M2,
    FACETS,
    MIN_LAYERS,
    VACUUM_OVER_CUTOFF,
    SurfaceProtocol,
    build_slab,
    faces_equivalent,
    measure_surfaces,
    thickness_series,
)
from labtwin.simulators.materials.vacancy import bulk_reference

ASE_EV_ATOM = 1e-11
ASE_EV_A = 1e-11
FIRE_J_M2 = 1e-6
GEOMETRY_A = 1e-9
EXACT_J_M2 = 1e-10
METALS = ("Al", "Cu", "Ag", "Au", "Ni", "Pd", "Pt")

#: per facet: area of the 1x1 surface cell / a^2 and spacing of atomic planes / a
FCC_AREA = {(1, 0, 0): 0.5, (1, 1, 0): 1 / math.sqrt(2), (1, 1, 1): math.sqrt(3) / 4}
FCC_SPACING = {(1, 0, 0): 0.5, (1, 1, 0): 1 / (2 * math.sqrt(2)), (1, 1, 1): 1 / math.sqrt(3)}


@pytest.mark.parametrize("miller", FACETS)
@pytest.mark.parametrize("element, layers", [("Cu", 5), ("Pt", 8)])
def test_slab_geometry(element, layers, miller) -> None:
    """One atom per plane of the 1x1 cell, the facet's area and plane spacing at the bulk
    lattice constant, c perpendicular to the surface, the vacuum asked for, bulk nearest
    neighbours, and a symmetry that swaps the two faces."""
    a0, _ = bulk_reference(element)
    slab = build_slab(element, miller, layers, vacuum_A=13.0)
    cell, z = slab.structure.cell, slab.structure.positions[:, 2]
    assert slab.n_layers == layers and slab.n_atoms == layers
    assert np.bincount(slab.layer).tolist() == [1] * layers
    assert slab.area_A2 == pytest.approx(FCC_AREA[miller] * a0**2, abs=GEOMETRY_A)
    assert abs(np.linalg.det(cell)) / cell[2, 2] == pytest.approx(slab.area_A2, abs=GEOMETRY_A)
    assert np.abs(cell[:2, 2]).max() < GEOMETRY_A and np.abs(cell[2, :2]).max() < GEOMETRY_A
    heights = np.sort(z)
    np.testing.assert_allclose(np.diff(heights), FCC_SPACING[miller] * a0, atol=GEOMETRY_A)
    assert slab.thickness_A == pytest.approx((layers - 1) * FCC_SPACING[miller] * a0)
    assert slab.vacuum_A == pytest.approx(cell[2, 2] - (heights[-1] - heights[0]))
    assert slab.vacuum_A == 13.0 > VACUUM_OVER_CUTOFF * cutoff_parameters([element], "asap")[2]
    assert slab.structure.min_distance() == pytest.approx(a0 / math.sqrt(2), abs=GEOMETRY_A)
    assert faces_equivalent(slab)


def test_a_slab_with_one_face_moved_is_not_symmetric() -> None:
    """The symmetry check can fail: lift the top plane by 0.3 Å and no operation swaps the
    faces."""
    slab = build_slab("Cu", (1, 1, 1), 5)
    positions = slab.structure.positions.copy()
    positions[slab.layer == 4, 2] += 0.3
    moved = Structure(slab.structure.species, positions, slab.structure.cell)
    assert faces_equivalent(slab)
    assert not faces_equivalent(dataclasses.replace(slab, structure=moved))


def test_faces_equivalent_in_energy_before_and_after_relaxation() -> None:
    """Atom energies of plane i and plane n - 1 - i agree (both faces are the same surface),
    and relaxation moves the two faces' planes by mirror-image amounts; an interior atom of
    a thick unrelaxed slab has exactly the bulk energy."""
    _, e_bulk = bulk_reference("Pt")
    slab = build_slab("Pt", (1, 1, 0), 13)
    order = np.argsort(slab.layer)
    energies = emt_evaluate([slab.structure], cutoff="asap").energies[order]
    np.testing.assert_allclose(energies, energies[::-1], atol=ASE_EV_ATOM)
    assert energies[6] == pytest.approx(e_bulk, abs=ASE_EV_ATOM)
    assert energies[0] > energies[1] > e_bulk  # the surface atoms are the least bound
    (relaxed,) = measure_surfaces([SurfaceProtocol("Pt", (1, 1, 0), 13, 1e-4, 3000)])
    assert relaxed.converged
    shift = (relaxed.structure.positions[:, 2] - slab.structure.positions[:, 2])[order]
    np.testing.assert_allclose(shift, -shift[::-1], atol=1e-4)
    # Pt(110)'s outer planes relax inwards by about 0.1 Å, the next ones outwards
    assert shift[0] > 0.05 and shift[1] < 0


@pytest.mark.parametrize("cutoff", ["asap", "ase"])
def test_slab_energies_equal_ase_emt(cutoff) -> None:
    """Rattled slabs of five metals and the three facets, one batch: the Warp engine's
    energies and forces are ASE's EMT's (``asap_cutoff`` matching the convention)."""
    from ase.calculators.emt import EMT

    rng = np.random.default_rng(7)
    cases = [("Cu", (1, 1, 0)), ("Pt", (1, 0, 0)), ("Au", (1, 1, 1)), ("Ni", (1, 1, 0))]
    cases.append(("Al", (1, 1, 1)))
    slabs = [build_slab(e, m, 6, cutoff=cutoff).structure for e, m in cases]
    rattled = [
        Structure(s.species, s.positions + rng.normal(0.0, 0.05, s.positions.shape), s.cell)
        for s in slabs
    ]
    result = emt_evaluate(rattled, cutoff=cutoff)
    for i, structure in enumerate(rattled):
        atoms = structure.to_ase()
        atoms.calc = EMT(asap_cutoff=cutoff == "asap")
        n = len(atoms)
        assert result.energy[i] / n == pytest.approx(
            atoms.get_potential_energy() / n, abs=ASE_EV_ATOM
        )
        np.testing.assert_allclose(result.forces_of(i), atoms.get_forces(), atol=ASE_EV_A)


def test_relaxed_surface_energy_equals_ase_fire() -> None:
    """gamma of four 7-plane slabs relaxed in one batch equals gamma from ASE's FIRE with
    ASE's EMT on the same slabs (both to 1e-4 eV/Å); the unrelaxed gamma to round-off."""
    from ase.calculators.emt import EMT
    from ase.optimize import FIRE

    cases = [("Cu", (1, 1, 0)), ("Pt", (1, 0, 0)), ("Au", (1, 1, 1)), ("Pd", (1, 1, 0))]
    protocols = [SurfaceProtocol(e, m, 7, 1e-4, 3000) for e, m in cases]
    results = measure_surfaces(protocols)
    for p, r in zip(protocols, results, strict=True):
        atoms = build_slab(p.element, p.miller, p.layers).structure.to_ase()
        atoms.calc = EMT(asap_cutoff=True)
        n, e_bulk = len(atoms), bulk_reference(p.element)[1]
        unrelaxed = (atoms.get_potential_energy() - n * e_bulk) / (2 * r.area_A2)
        assert FIRE(atoms, logfile=None).run(fmax=1e-4, steps=3000)
        relaxed = (atoms.get_potential_energy() - n * e_bulk) / (2 * r.area_A2)
        assert r.converged and r.max_force_eV_A < 1e-4
        assert r.unrelaxed_surface_energy_eV_A2 == pytest.approx(unrelaxed, abs=1e-12)
        assert r.surface_energy_J_m2 == pytest.approx(relaxed * EV_PER_A2_IN_J_M2, abs=FIRE_J_M2)
        assert r.surface_energy_J_m2 < r.unrelaxed_surface_energy_J_m2
        assert r.surface_energy_J_m2 == pytest.approx(r.surface_energy_eV_A2 * 16.02176634)


@pytest.mark.parametrize("element", ["Cu", "Pt"])
def test_surface_energy_converges_with_thickness(element) -> None:
    """The open (110) facet, the slowest to converge: successive differences of the relaxed
    gamma shrink at every added plane, down to under 1e-4 J/m^2 at 12 planes; the unrelaxed
    gamma is exactly constant once the slab is thicker than EMT's range from each face."""
    series = thickness_series(element, (1, 1, 0), range(3, 13), fmax=1e-5, max_steps=5000)
    assert all(r.converged for r in series.results)
    changes = np.abs(series.change_J_m2)
    assert np.all(np.diff(changes) < 0), changes
    assert series.last_change_J_m2 < 1e-4
    unrelaxed = series.unrelaxed_surface_energy_J_m2
    thick = np.array(series.layers) >= 7
    np.testing.assert_allclose(unrelaxed[thick], unrelaxed[thick][0], atol=EXACT_J_M2)


def test_surface_energy_does_not_depend_on_the_vacuum() -> None:
    """No pair spans the gap: a wider vacuum gives the same relaxed gamma to round-off."""
    protocols = [SurfaceProtocol("Ag", (1, 1, 1), 6, 1e-3, 500, v) for v in (12.0, 20.0)]
    narrow, wide = measure_surfaces(protocols)
    assert narrow.surface_energy_eV_A2 == pytest.approx(wide.surface_energy_eV_A2, abs=1e-14)


def test_facet_ordering_of_the_emt_metals() -> None:
    """For all seven metals, relaxed 8-plane slabs (one batch of 21): gamma(111) < gamma(100)
    < gamma(110), the order of broken nearest-neighbour bonds per area (3 / (sqrt 3 a^2 / 4)
    < 4 / (a^2 / 2) < 6 / (a^2 / sqrt 2)), and every gamma is positive."""
    protocols = [SurfaceProtocol(e, m, 8, 1e-3, 2000) for e in METALS for m in FACETS]
    gamma = np.array([r.surface_energy_J_m2 for r in measure_surfaces(protocols)])
    gamma = gamma.reshape(len(METALS), len(FACETS))  # columns (100), (110), (111)
    assert np.all(gamma > 0)
    assert np.all(gamma[:, 2] < gamma[:, 0]), gamma
    assert np.all(gamma[:, 0] < gamma[:, 1]), gamma


def test_a_batch_reads_as_each_slab_alone() -> None:
    """Different metals, facets, thicknesses and tolerances in one batch give each slab's own
    result, bit for bit."""
    protocols = [
        SurfaceProtocol("Cu", (1, 1, 1), 4, 1e-3, 500),
        SurfaceProtocol("Ni", (1, 1, 0), 9, 1e-4, 2000),
        SurfaceProtocol("Au", (0, 0, 1), 5, 1e-2, 30),
    ]
    batch = measure_surfaces(protocols)
    for p, r in zip(protocols, batch, strict=True):
        (alone,) = measure_surfaces([p])
        assert r.surface_energy_eV_A2 == alone.surface_energy_eV_A2
        assert r.relax_steps == alone.relax_steps


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"element": "Fe"}, "no EMT parameters"),
        ({"element": "Xx"}, "no EMT parameters"),
        ({"miller": (0, 0, 0)}, "names no plane"),
        ({"miller": (2, 1, 0)}, "not a low-index facet"),
        ({"miller": (1, 0)}, "three integers"),
        ({"miller": (0.5, 0, 1)}, "three integers"),
        ({"miller": "abc"}, "three integers"),
        ({"layers": MIN_LAYERS - 1}, "a slab needs"),
        ({"layers": 0}, "a slab needs"),
        ({"layers": 4.5}, "must be an integer"),
        ({"vacuum_A": 6.0}, "does not isolate"),
        ({"vacuum_A": float("nan")}, "does not isolate"),
    ],
)
def test_invalid_slabs_raise_with_a_reason(kwargs, message) -> None:
    args = {"element": "Cu", "miller": (1, 1, 1), "layers": 5, "vacuum_A": 14.0} | kwargs
    with pytest.raises(ValueError, match=message):
        build_slab(**args)
    with pytest.raises(ValueError, match=message):
        measure_surfaces([SurfaceProtocol(**args)])


def test_invalid_protocols_and_series_raise() -> None:
    with pytest.raises(ValueError, match="fmax must be positive"):
        measure_surfaces([SurfaceProtocol("Cu", (1, 1, 1), 5, fmax=0.0)])
    with pytest.raises(ValueError, match="increasing layer counts"):
        thickness_series("Cu", (1, 1, 1), [5, 5])
    with pytest.raises(ValueError, match="increasing layer counts"):
        thickness_series("Cu", (1, 1, 1), [5])
    assert measure_surfaces([]) == []
