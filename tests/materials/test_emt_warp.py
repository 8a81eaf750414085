"""The batched warp EMT engine against ASE's EMT, finite differences and itself batched.

Tolerances (named once, here):

- float64 against ASE: both evaluate the same closed form in double precision and differ
  only in summation order, so energies agree to 1e-11 eV/atom (measured 3e-14), forces to
  1e-11 eV/Å (measured 2.4e-14) and stresses to 1e-12 eV/Å^3 (measured 2.6e-15).
  Energies are cohesive-energy differences (E - E0 per atom, near zero at equilibrium), so
  the bound is absolute per atom, not relative.
- float32 against ASE: single-precision rounding (relative 6e-8) of the ~80 neighbour terms
  per atom and of the atomic-sphere and pair energies, each of order 20 eV, which cancel to
  the cohesive energy: 5e-5 eV/atom (measured 1.4e-5), 1e-4 eV/Å (measured 1.2e-5),
  1e-5 eV/Å^3 (measured 2.1e-6).
- finite differences (float64, central, step 1e-5 Å or 1e-5 strain): truncation h^2 E'''
  and round-off 1e-15 / h, both under 1e-9; asserted at 1e-7.
"""

from __future__ import annotations

import numpy as np
import pytest

from labtwin.simulators.materials import decorate, prototype, remove_sites, supercell
from labtwin.simulators.materials.emt_warp import (
    EMT_PARAMETERS,
    CrystalBatch,
    WarpEMT,
    cutoff_parameters,
    emt_evaluate,
    relax_emt,
)

E64_EV_ATOM, F64_EV_A, S64_EV_A3 = 1e-11, 1e-11, 1e-12
E32_EV_ATOM, F32_EV_A, S32_EV_A3 = 5e-5, 1e-4, 1e-5
FD_TOL = 1e-7
METALS = ("Cu", "Al", "Ni", "Pd", "Ag", "Pt", "Au")
#: room-temperature lattice constants (Å), near each metal's EMT minimum
A0 = {"Cu": 3.61, "Al": 4.05, "Ni": 3.52, "Pd": 3.89, "Ag": 4.09, "Pt": 3.92, "Au": 4.08}


def _rattled(atoms, seed: int, amount: float = 0.04):
    atoms = atoms.copy()
    atoms.rattle(amount, seed=seed)
    return atoms


def _sheared(atoms, seed: int, amount: float = 0.04):
    """``atoms`` under a random non-symmetric strain (a triclinic cell), atoms carried along."""
    atoms = atoms.copy()
    strain = np.eye(3) + amount * np.random.default_rng(seed).standard_normal((3, 3))
    atoms.set_cell(atoms.cell[:] @ strain, scale_atoms=True)
    return atoms


def reference_cells() -> list:
    """Primitive and conventional cells of the seven metals, strained (triclinic) cells, a
    vacancy supercell and ordered alloys (L1_2 Cu3Au, Ni3Al; L1_0 CuAu, PtNi), rattled."""
    from ase.build import bulk

    cells = []
    for k, el in enumerate(METALS):
        cells.append(_rattled(bulk(el, "fcc", a=A0[el]), seed=k))  # 1 atom
        cells.append(_rattled(prototype("fcc", el, A0[el] ** 3 / 4).to_ase(), seed=10 + k))
    cells.append(_sheared(_rattled(bulk("Cu", "fcc", a=3.55), 1), seed=1, amount=0.06))
    cells.append(_sheared(_rattled(bulk("Au", "fcc", a=4.1, cubic=True), 2), seed=2))
    host = supercell(prototype("fcc", "Cu", 3.61**3 / 4), 2)
    cells.append(_rattled(remove_sites(host, [0]).to_ase(), seed=3))
    for host_el, solute, n, a in (("Cu", "Au", 1, 3.75), ("Ni", "Al", 1, 3.57)):
        cells.append(
            _rattled(
                decorate(prototype("fcc", host_el, a**3 / 4), solute, n, "ordered").to_ase(), 4
            )
        )
    for host_el, solute, a in (("Cu", "Au", 3.85), ("Pt", "Ni", 3.75)):
        cell = decorate(prototype("fcc", host_el, a**3 / 4), solute, 2, "ordered").to_ase()
        cells.append(_sheared(_rattled(cell, 5), seed=5, amount=0.02))
    return cells


def ase_results(atoms, asap_cutoff: bool = False) -> tuple[float, np.ndarray, np.ndarray]:
    from ase.calculators.emt import EMT

    atoms = atoms.copy()
    atoms.calc = EMT(asap_cutoff=asap_cutoff)
    return atoms.get_potential_energy(), atoms.get_forces(), atoms.get_stress()


@pytest.fixture(scope="module")
def cells() -> list:
    return reference_cells()


@pytest.mark.parametrize("cutoff", ["ase", "asap"])
def test_float64_matches_ase_emt_to_round_off(cells, cutoff) -> None:
    """One launch for all 21 cells; each compared with ASE's EMT (``EMT()`` for the ``ase``
    cutoff, ``EMT(asap_cutoff=True)`` for ``asap``)."""
    result = emt_evaluate(cells, dtype=np.float64, cutoff=cutoff)
    assert result.stress.shape == (len(cells), 6)
    for s, atoms in enumerate(cells):
        energy, forces, stress = ase_results(atoms, asap_cutoff=cutoff == "asap")
        assert abs(result.energy[s] - energy) / len(atoms) < E64_EV_ATOM, s
        assert np.abs(result.forces_of(s) - forces).max() < F64_EV_A, s
        assert np.abs(result.stress[s] - stress).max() < S64_EV_A3, s
        if len(atoms) > 1:  # rattled: the forces are not trivially zero
            assert np.abs(forces).max() > 0.01


def test_float32_matches_ase_emt_within_single_precision(cells) -> None:
    result = emt_evaluate(cells, dtype=np.float32)
    for s, atoms in enumerate(cells):
        energy, forces, stress = ase_results(atoms)
        assert abs(result.energy[s] - energy) / len(atoms) < E32_EV_ATOM, s
        assert np.abs(result.forces_of(s) - forces).max() < F32_EV_A, s
        assert np.abs(result.stress[s] - stress).max() < S32_EV_A3, s


def test_mixed_batch_equals_cells_one_at_a_time(cells) -> None:
    """1- to 31-atom cells of every shape in one launch give bit for bit what each gives alone
    (each thread works on its own atom and the sums run in a fixed order)."""
    order = [20, 0, 16, 3, 18, 14]
    batch = emt_evaluate([cells[i] for i in order])
    for s, i in enumerate(order):
        alone = emt_evaluate([cells[i]])
        assert batch.energy[s] == alone.energy[0]
        assert np.array_equal(batch.forces_of(s), alone.forces)
        assert np.array_equal(batch.stress[s], alone.stress[0])
    # a list skin adds pairs beyond the cutoff, which contribute exactly nothing
    skinned = WarpEMT([cells[i] for i in order], skin=1.0).evaluate()
    assert np.array_equal(skinned.forces, batch.forces)
    assert np.array_equal(skinned.energy, batch.energy)


def test_forces_and_stress_are_energy_derivatives(cells) -> None:
    """Central differences of the energy in float64: forces on a sheared alloy and a
    primitive cell (whose atom sees many images of itself), and the stress
    sigma = (1/V) dE/d(strain) with atoms carried along."""
    h = 1e-5
    for atoms in (cells[20], cells[14], cells[15]):
        n = len(atoms)
        result = emt_evaluate([atoms])
        displaced = []
        for i in range(n):
            for c in range(3):
                for sign in (1, -1):
                    moved = atoms.copy()
                    moved.positions[i, c] += sign * h
                    displaced.append(moved)
        energy = emt_evaluate(displaced).energy.reshape(n, 3, 2)
        fd_forces = -(energy[..., 0] - energy[..., 1]) / (2 * h)
        assert np.abs(fd_forces - result.forces).max() < FD_TOL

        strained = []
        pairs = [(0, 0), (1, 1), (2, 2), (1, 2), (0, 2), (0, 1)]  # ASE's Voigt order
        for a, b in pairs:
            for sign in (1, -1):
                eps = np.eye(3)
                eps[a, b] += sign * h / 2 if a != b else sign * h
                if a != b:
                    eps[b, a] += sign * h / 2
                moved = atoms.copy()
                moved.set_cell(atoms.cell[:] @ eps, scale_atoms=True)
                strained.append(moved)
        energy = emt_evaluate(strained).energy.reshape(6, 2)
        fd_stress = (energy[:, 0] - energy[:, 1]) / (2 * h) / atoms.get_volume()
        assert np.abs(fd_stress - result.stress[0]).max() < FD_TOL


def test_cutoff_conventions_and_parameters_follow_ase() -> None:
    from ase.calculators.emt import EMT, parameters
    from ase.units import Bohr

    from labtwin.simulators.materials.emt_warp import ASE_GLOBAL_S0_BOHR, BOHR_A

    assert BOHR_A == Bohr
    assert ASE_GLOBAL_S0_BOHR == max(p[1] for p in parameters.values())
    for el, p in EMT_PARAMETERS.items():
        assert parameters[el] == p
    from ase import Atoms

    for symbols, asap in (("Cu", False), ("Cu", True), ("NiAl", True)):
        atoms = Atoms(symbols, cell=np.eye(3) * 4, pbc=True)
        rc, rc_list, acut = EMT(asap_cutoff=asap)._calc_cutoff(atoms)
        ours = cutoff_parameters(atoms.get_chemical_symbols(), "asap" if asap else "ase")
        assert ours == pytest.approx((rc, acut, rc_list), rel=1e-15)


def test_asap_cutoff_agrees_with_asap3(cells) -> None:
    """asap3's compiled EMT is the same model as ``cutoff="asap"`` up to its own rounding
    (1e-7 eV/atom, as ``simulators/materials/emt.py`` states for ASE against asap3)."""
    asap3 = pytest.importorskip("asap3")
    result = emt_evaluate(cells, cutoff="asap")
    for s, atoms in enumerate(cells):
        atoms = atoms.copy()
        atoms.calc = asap3.EMT()
        assert abs(atoms.get_potential_energy() - result.energy[s]) / len(atoms) < 1e-6
        assert np.abs(atoms.get_forces() - result.forces_of(s)).max() < 1e-5


def test_bad_cells_are_refused_with_reasons() -> None:
    from ase import Atoms

    good = prototype("fcc", "Cu", 11.8)
    with pytest.raises(ValueError, match="no EMT parameters for Fe"):
        emt_evaluate([good, prototype("fcc", "Fe", 11.8)])
    with pytest.raises(ValueError, match="singular"):
        emt_evaluate(
            [Atoms("Cu2", positions=[[0, 0, 0], [1, 1, 1]], cell=np.diag([3, 3, 0]), pbc=True)]
        )
    with pytest.raises(ValueError, match="periodic"):
        emt_evaluate([Atoms("Cu", cell=np.eye(3) * 3, pbc=False)])
    with pytest.raises(ValueError, match="finite"):
        emt_evaluate([Atoms("Cu", positions=[[np.nan, 0, 0]], cell=np.eye(3) * 3, pbc=True)])
    with pytest.raises(ValueError, match="no structures"):
        emt_evaluate([])
    with pytest.raises(ValueError, match="cutoff convention"):
        emt_evaluate([good], cutoff="bogus")


def test_neighbour_lists_grow_when_a_cell_is_compressed() -> None:
    """Neighbour rows too short for a cell squeezed to a third of its volume (about 240
    neighbours) overflow; the engine enlarges them and repeats, giving ASE's answer."""
    atoms = prototype("fcc", "Cu", 11.8).to_ase()
    squeezed = atoms.copy()
    squeezed.set_cell(atoms.cell[:] * (1 / 3) ** (1 / 3), scale_atoms=True)
    engine = WarpEMT([atoms, squeezed])
    engine.resize_lists(80)  # enough for the first cell (78 neighbours), not the second
    result = engine.evaluate()
    assert engine.lists.capacity > 200
    energy, forces, stress = ase_results(squeezed)
    assert abs(result.energy[1] - energy) / 4 < E64_EV_ATOM * 10
    assert np.abs(result.stress[1] - stress).max() < S64_EV_A3 * 10


def _vacancy_cells():
    from ase.build import bulk

    cu = bulk("Cu", "fcc", a=3.61, cubic=True) * (2, 2, 2)
    del cu[0]
    pt = bulk("Pt", "fcc", a=3.95, cubic=True) * (2, 2, 2)
    del pt[5]
    strained = _sheared(_rattled(cu, 7, 0.02), seed=7, amount=0.02)
    return [_rattled(cu, 1, 0.03), _rattled(pt, 2, 0.03), strained]


def ase_relaxed_energy(atoms, cell: bool, fmax: float) -> float:
    from ase.calculators.emt import EMT
    from ase.filters import UnitCellFilter
    from ase.optimize import FIRE

    atoms = atoms.copy()
    atoms.calc = EMT()
    FIRE(UnitCellFilter(atoms) if cell else atoms, logfile=None).run(fmax=fmax, steps=2000)
    return atoms.get_potential_energy()


@pytest.mark.parametrize("cell", [False, True])
def test_batched_fire_relaxes_vacancy_cells_to_ase_energies(cell) -> None:
    """Vacancy cells (Cu, Pt and a sheared Cu one; the last two with the cell free) relaxed
    in one batch reach the energies ASE's FIRE (on a ``UnitCellFilter`` for the cell)
    reaches with ASE's EMT. Both stop at
    generalised forces below 1e-4 eV/Å; the energy left above the minimum is then of order
    N fmax^2 / k with k ~ 1 eV/Å^2 (3e-7 eV), so 1e-6 eV bounds the difference of two such
    stopping points. The batch gives bit for bit each cell's result alone, whatever the
    neighbour-list skin."""
    cells = _vacancy_cells()[1:] if cell else _vacancy_cells()  # ASE's cell filter is slow
    fmax = 1e-4
    result = relax_emt(cells, fmax=fmax, cell=cell)
    assert result.converged.all(), result.max_force
    for s, atoms in enumerate(cells):
        assert result.energy[s] == pytest.approx(ase_relaxed_energy(atoms, cell, fmax), abs=1e-6)
    alone = relax_emt(cells[-1:], fmax=fmax, cell=cell, skin=0.2)  # lists rebuilt more often
    assert alone.energy[0] == result.energy[-1]
    start = result.batch.system_start()
    assert np.array_equal(alone.batch.positions, result.batch.positions[start[-2] :])
    assert np.array_equal(alone.batch.cell[0], result.batch.cell[-1])
    if cell:
        volumes = result.batch.volumes()
        assert not np.allclose(volumes, CrystalBatch.from_structures(cells).volumes())
        # the cell rows' forces are D^-T (V stress) / N, so the stress left is about fmax N / V
        bound = 1.5 * fmax * np.array([len(a) for a in cells]) / volumes
        assert np.all(np.abs(result.stress).max(axis=1) < bound)


def test_relaxation_in_float32_and_unconverged_runs_are_reported() -> None:
    cells = _vacancy_cells()[:1]
    result32 = relax_emt(cells, fmax=1e-2, dtype=np.float32)
    result64 = relax_emt(cells, fmax=1e-2)
    assert result32.converged.all()
    assert result32.energy[0] == pytest.approx(result64.energy[0], abs=1e-3)
    short = relax_emt(cells, fmax=1e-6, max_steps=10)
    assert not short.converged.any()
    assert short.n_steps[0] == 10
    assert short.max_force[0] > 1e-6
