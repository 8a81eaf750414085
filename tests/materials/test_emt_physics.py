"""The materials engine against physics: EMT's own parameters, finite differences, the two
EMT implementations, a known ordered alloy and its hull, structure symmetry."""

from __future__ import annotations

import math

import numpy as np
import pytest

from labtwin.simulators.materials import (
    EMT_ELEMENTS,
    Structure,
    decorate,
    e_above_hull,
    elemental_reference,
    fit_equation_of_state,
    formation_energy_per_atom,
    make_calculator,
    prototype,
    relax,
    remove_sites,
    supercell,
)
from labtwin.simulators.materials.alloy import AlloySpec, reference_cells
from labtwin.simulators.materials.eos import EV_PER_A3_IN_GPA
from labtwin.simulators.materials.hull import BOHR_A, parameter_volume_per_atom, phase_diagram

BACKEND = "asap3"
#: the paper's six metals (Jacobsen, Stoltze, Norskov 1996); ASE's Al parameters are a later,
#: longer-ranged fit whose smooth cutoff moves the minimum further (tolerances below)
PAPER_METALS = ("Cu", "Ag", "Au", "Ni", "Pd", "Pt")


def parameter_values(element: str) -> tuple[float, float]:
    """fcc lattice constant (Å) and bulk modulus (GPa) implied by the published parameters.

    EMT's cohesive function E(s) = E0 (1 + lambda (s - s0)) exp(-lambda (s - s0)) has its
    minimum at the neutral-sphere radius s0, so a = s0 (16 pi / 3)^(1/3) and, with
    V = 4 pi s^3 / 3, B = V d2E/dV2 = -E0 lambda^2 / (12 pi s0).
    """
    from ase.calculators.emt import parameters

    e0, s0, _, _, _, lam, _ = parameters[element]
    a = s0 * BOHR_A * (16 * math.pi / 3) ** (1 / 3)
    bulk = -e0 * (lam / BOHR_A) ** 2 / (12 * math.pi * s0 * BOHR_A) * EV_PER_A3_IN_GPA
    return a, bulk


@pytest.mark.parametrize("element", EMT_ELEMENTS)
def test_pure_metal_lattice_constant_and_bulk_modulus_match_emt_parameters(element) -> None:
    """Relaxed fcc a within 1 % and B within 3 % of the parameter values for the paper's
    metals (measured: a 0.13-0.84 % low, B -2.6 to +0.5 %): the calculators' smooth cutoff
    between the 3rd and 4th neighbour shells, which the closed form leaves out, shifts the
    minimum slightly. Al: 2 % and 10 % (measured -1.7 %, -7.8 %; its longer-ranged fit feels
    the cutoff most). Also close to experiment, which EMT was fitted to: Cu 3.61 Å, 137 GPa."""
    a_ref, b_ref = parameter_values(element)
    result = relax(prototype("fcc", element, parameter_volume_per_atom(element)), BACKEND)
    assert result.converged, result.reason
    a = (4 * result.structure.volume_per_atom) ** (1 / 3)
    bulk = fit_equation_of_state(result.structure, BACKEND).bulk_modulus_GPa
    a_tol, b_tol = (0.01, 0.03) if element in PAPER_METALS else (0.02, 0.10)
    assert a == pytest.approx(a_ref, rel=a_tol)
    assert bulk == pytest.approx(b_ref, rel=b_tol)
    # the EOS minimum sits at the relaxed volume: both say where dE/dV = 0, up to the
    # relaxation's residual stress (at most fmax N / V, 0.10-0.15 GPa) over B in volume
    # (0.26 % for Al's 39 GPa), doubled for the Birch-Murnaghan fit
    eos = fit_equation_of_state(result.structure, BACKEND)
    residual_gpa = 0.01 / result.structure.volume_per_atom * EV_PER_A3_IN_GPA
    assert eos.volume_A3 == pytest.approx(result.structure.volume, rel=2 * residual_gpa / bulk)


def rattled_alloy(seed: int = 3) -> Structure:
    cell = supercell(prototype("fcc", "Cu", 12.5), 2)
    cell = decorate(cell, "Au", 10, "random", np.random.default_rng(seed))
    rng = np.random.default_rng(seed)
    strain = np.eye(3) + 0.01 * rng.standard_normal((3, 3))
    return Structure(
        cell.species,
        cell.positions @ strain + 0.05 * rng.standard_normal(cell.positions.shape),
        cell.cell @ strain,
    )


def energy(structure: Structure, backend: str = BACKEND) -> float:
    atoms = structure.to_ase()
    atoms.calc = make_calculator(backend)
    return float(atoms.get_potential_energy())


@pytest.mark.parametrize("backend", ["asap3", "ase"])
def test_forces_are_minus_the_energy_gradient(backend) -> None:
    """Central differences with h = 1e-4 Å: truncation ~ h^2 E''' ~ 1e-8 eV/Å, round-off
    ~ 1e-12 eV / h = 1e-8 eV/Å; forces here are up to 1 eV/Å; tolerance 1e-5 eV/Å."""
    s = rattled_alloy()
    atoms = s.to_ase()
    atoms.calc = make_calculator(backend)
    forces = atoms.get_forces()
    h = 1e-4
    for atom, axis in [(0, 0), (5, 1), (17, 2), (31, 0)]:
        plus, minus = s.positions.copy(), s.positions.copy()
        plus[atom, axis] += h
        minus[atom, axis] -= h
        e_plus = energy(Structure(s.species, plus, s.cell), backend)
        e_minus = energy(Structure(s.species, minus, s.cell), backend)
        assert forces[atom, axis] == pytest.approx(-(e_plus - e_minus) / (2 * h), abs=1e-5)
    assert np.abs(forces).max() > 0.05  # a rattled alloy: the check is not of zeros


@pytest.mark.parametrize("backend", ["asap3", "ase"])
def test_stress_is_the_strain_derivative_of_the_energy(backend) -> None:
    """sigma_ij = (1/V) dE/d eps_ij under a homogeneous symmetric strain (atoms carried
    along), central differences with eps = 1e-5: error ~ 1e-9 eV/Å^3 against stresses of
    ~1e-2; tolerance 1e-6 eV/Å^3."""
    s = rattled_alloy(seed=4)
    atoms = s.to_ase()
    atoms.calc = make_calculator(backend)
    stress = atoms.get_stress(voigt=False)
    eps = 1e-5
    for i, j in [(0, 0), (1, 1), (2, 2), (0, 1), (1, 2), (0, 2)]:
        values = []
        for sign in (1, -1):
            strain = np.eye(3)
            strain[i, j] += sign * eps / (2 if i != j else 1)
            strain[j, i] += sign * eps / 2 if i != j else 0
            values.append(
                energy(Structure(s.species, s.positions @ strain, s.cell @ strain), backend)
            )
        derivative = (values[0] - values[1]) / (2 * eps) / s.volume
        assert stress[i, j] == pytest.approx(derivative, abs=1e-6)
    assert np.abs(stress).max() > 1e-3


def test_asap3_and_ase_emt_agree_on_the_same_structures() -> None:
    """asap3's compiled EMT and ASE's EMT with asap's cutoff are the same model: energies
    agree to 1e-6 eV/atom, forces to 1e-5 eV/Å, stresses to 1e-6 eV/Å^3 (measured 3e-8,
    7e-7, 6e-8: float round-off in different summation orders) on rattled, strained cells of
    Cu-Au, Cu-Au-Ni and Cu-Au-Al."""
    for extra in (None, "Ni", "Al"):
        s = rattled_alloy(seed=5)
        if extra:
            species = list(s.species)
            species[1] = species[2] = extra
            s = Structure(tuple(species), s.positions, s.cell)
        results = []
        for backend in ("asap3", "ase"):
            atoms = s.to_ase()
            atoms.calc = make_calculator(backend)
            results.append(
                (atoms.get_potential_energy() / len(s), atoms.get_forces(), atoms.get_stress())
            )
        (e1, f1, s1), (e2, f2, s2) = results
        assert e1 == pytest.approx(e2, abs=1e-6)
        np.testing.assert_allclose(f1, f2, atol=1e-5)
        np.testing.assert_allclose(s1, s2, atol=1e-6)


@pytest.mark.slow  # scipy's matrix exponentials of the Frechet filter: 13-35 s on 2 busy cores
def test_the_two_cell_filters_relax_to_the_same_cell() -> None:
    """UnitCellFilter (the lab's) and FrechetCellFilter have the same fixed point: the same
    energy to 5e-5 eV/atom (measured 8e-6: both stop anywhere inside the 0.01 eV/Å
    tolerance) and volume to 0.2 % (the tolerance bounds the residual stress to 0.14 GPa,
    0.1 % of B in volume)."""
    start = decorate(prototype("hcp", "Cu", 12.0), "Pd", 1, "ordered")  # a strained start
    start = Structure(start.species, start.positions, start.cell @ np.diag([1.03, 0.98, 1.05]))
    unit = relax(start, BACKEND, cell_filter="unit")
    frechet = relax(start, BACKEND, cell_filter="frechet")
    assert unit.converged and frechet.converged
    assert unit.energy_per_atom_eV == pytest.approx(frechet.energy_per_atom_eV, abs=5e-5)
    assert unit.structure.volume == pytest.approx(frechet.structure.volume, rel=2e-3)


def test_ordered_prototypes_have_their_space_groups() -> None:
    """Sublattice filling gives L1_2 (Pm-3m, 221), L1_0 (P4/mmm, 123) and B2 (Pm-3m)."""
    from pymatgen.symmetry.analyzer import SpacegroupAnalyzer

    def group(lattice: str, n_solute: int, repeats: int = 1) -> int:
        cell = supercell(prototype(lattice, "Cu", 12.0), repeats)
        cell = decorate(cell, "Au", n_solute * repeats**3, "ordered")
        return SpacegroupAnalyzer(cell.to_pymatgen(), symprec=1e-3).get_space_group_number()

    assert group("fcc", 1) == 221 and group("fcc", 1, repeats=2) == 221  # L1_2 Cu3Au
    assert group("fcc", 2) == 123 and group("fcc", 2, repeats=2) == 123  # L1_0 CuAu
    assert group("fcc", 3) == 221  # L1_2 CuAu3
    assert group("bcc", 1) == 221 and group("bcc", 1, repeats=2) == 221  # B2
    assert group("fcc", 0) == 225 and group("bcc", 0) == 229 and group("hcp", 0) == 194


def test_ase_and_pymatgen_round_trip_keeps_the_structure() -> None:
    s = rattled_alloy()
    for back in (Structure.from_ase(s.to_ase()), Structure.from_pymatgen(s.to_pymatgen())):
        assert back.species == s.species
        np.testing.assert_allclose(back.cell, s.cell, atol=1e-12)
        np.testing.assert_allclose(back.positions, s.positions, atol=1e-9)


def test_cu3au_forms_and_sits_on_a_consistent_hull() -> None:
    """L1_2 Cu3Au has a negative EMT formation energy (measured -14 meV/atom; experiment
    -70 meV/atom, EMT underbinds Cu-Au), lies on the hull of the elements and the classic
    ordered cells (L1_2 A3B, L1_0 AB, L1_2 AB3, B2 AB; E_hull = 0), and pymatgen's
    decomposition energies of every entry are non-negative; a random Cu3Au arrangement
    lies above the ordered one."""
    classic = [("fcc", 0.0), ("fcc", 0.25), ("fcc", 0.5), ("fcc", 0.75), ("bcc", 0.5), ("fcc", 1.0)]
    specs = [AlloySpec("Cu", "Au", lattice, x, "ordered", 1) for lattice, x in classic]
    references = tuple(reference_cells(specs, BACKEND))  # the lowest cell of each composition
    cu3au = next(r for r in references if r.composition == {"Cu": 3, "Au": 1})
    assert cu3au.name == "Cu3Au (fcc 1x1x1, ordered)"
    e_form = formation_energy_per_atom(cu3au.energy_per_atom_eV, cu3au.composition, BACKEND)
    assert -0.05 < e_form < -0.005
    assert e_above_hull(references, cu3au.composition, cu3au.energy_per_atom_eV) == pytest.approx(
        0.0, abs=1e-9
    )
    diagram, _ = phase_diagram(references)
    for entry in diagram.all_entries:
        assert diagram.get_e_above_hull(entry) >= -1e-12
        _, decomposition = diagram.get_decomp_and_e_above_hull(entry)
        assert decomposition >= -1e-12
    stable = {e.composition.reduced_formula for e in diagram.stable_entries}
    assert {"Cu", "Au", "Cu3Au"} <= stable
    # a formation energy is the energy above the elements' tie line: the elements sit at 0
    for element in ("Cu", "Au"):
        ref = elemental_reference(element, BACKEND)
        assert formation_energy_per_atom(ref.energy_per_atom_eV, ref.composition, BACKEND) == 0
    random = relax(
        decorate(supercell(prototype("fcc", "Cu", 12.7), 2), "Au", 8, "random",
                 np.random.default_rng(0)),
        BACKEND,
    )  # fmt: skip
    assert random.converged
    assert random.energy_per_atom_eV > cu3au.energy_per_atom_eV + 0.005
    assert (
        e_above_hull(references, random.structure.composition(), random.energy_per_atom_eV) > 0.005
    )


def test_all_emt_metals_are_fcc_but_al_and_cu_vacancy_costs_about_an_ev() -> None:
    """EMT's ground states: fcc for the paper's six (bcc and hcp above), and a relaxed Cu
    vacancy (107 of 108 sites) costs 1.22 eV, between EMT's published 1.1-1.3 eV range and
    experiment's 1.28 eV; tolerance 1.0-1.4 eV."""
    for element in PAPER_METALS:
        assert elemental_reference(element, BACKEND).name == f"{element} (fcc)"
    bulk = relax(supercell(prototype("fcc", "Cu", parameter_volume_per_atom("Cu")), 3), BACKEND)
    vacancy = relax(remove_sites(bulk.structure, [0]), BACKEND)
    assert bulk.converged and vacancy.converged and len(vacancy.structure) == 107
    e_vacancy = vacancy.energy_eV - 107 * bulk.energy_per_atom_eV
    assert 1.0 < e_vacancy < 1.4


def test_non_converged_and_blown_up_relaxations_are_reported() -> None:
    start = decorate(supercell(prototype("fcc", "Cu", 12.0), 2), "Au", 8, "random",
                     np.random.default_rng(2))  # fmt: skip
    short = relax(start, BACKEND, max_steps=2)
    assert not short.converged and "did not converge in 2 steps" in short.reason
    # atoms at half their spacing fly apart: the volume runs away from its start
    squeezed = relax(prototype("fcc", "Cu", parameter_volume_per_atom("Cu")).scaled(0.5), BACKEND)
    assert not squeezed.converged and "blew up" in squeezed.reason
