"""The crystal batch is the MD engine's batched state (MDState with species and 3x3 cells):
construction, the derived box, slicing, concatenation with MD systems, dtype and Warp device
round trips, and that the EMT engine gives the same numbers for a batch and its slices."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from labtwin.simulators.materials.emt_warp import CrystalBatch, emt_evaluate
from labtwin.simulators.materials.structure import prototype, supercell
from labtwin.simulators.md import MDState
from labtwin.simulators.md.build import lj_fluid


def _cells():
    sheared = prototype("fcc", "Cu", 11.8)
    cell = sheared.cell.copy()
    cell[1, 0] += 0.4  # triclinic
    sheared = dataclasses.replace(sheared, cell=cell)
    return [supercell(prototype("fcc", "Au", 17.0), 2), sheared, prototype("bcc", "Ni", 11.0)]


def test_a_crystal_batch_is_an_md_state_with_no_fields_of_its_own() -> None:
    assert issubclass(CrystalBatch, MDState)
    assert [f.name for f in dataclasses.fields(CrystalBatch)] == [
        f.name for f in dataclasses.fields(MDState)
    ]
    batch = CrystalBatch.from_structures(_cells())
    assert batch.n_systems == 3 and list(batch.atoms_per_system()) == [32, 4, 2]
    assert batch.dtype == np.float64 and batch.periodic.all()
    assert batch.numbers.tolist()[:1] == [79] and batch.masses[0] == pytest.approx(196.966569)
    # box derived from the cell: the diagonal of an orthorhombic cell, NaN for a triclinic one
    assert batch.orthorhombic().tolist() == [True, False, True]
    np.testing.assert_array_equal(batch.box[0], np.diag(batch.cell[0]))
    assert np.isnan(batch.box[1]).all()
    np.testing.assert_allclose(batch.volume(), np.abs(np.linalg.det(batch.cell)), rtol=1e-15)
    with pytest.raises(ValueError, match="species"):
        CrystalBatch(**{**vars(batch), "numbers": None})
    with pytest.raises(ValueError, match="diagonal"):
        CrystalBatch(**{**vars(batch), "box": np.ones((3, 3))})


def test_md_states_keep_their_behaviour_without_crystal_fields() -> None:
    fluid = lj_fluid(32, 0.5, 1.0, seed=1)
    assert fluid.numbers is None and fluid.cell is None
    assert fluid.orthorhombic().all()
    np.testing.assert_allclose(fluid.volume(), fluid.box.astype(np.float64).prod(axis=1))
    np.testing.assert_array_equal(fluid.cells()[0], np.diag(fluid.box[0]))
    with pytest.raises(ValueError, match="either"):
        MDState.from_arrays(np.zeros((2, 3)), [0, 0])


def test_select_concatenate_dtype_and_device_round_trips() -> None:
    batch = CrystalBatch.from_structures(_cells())
    again = CrystalBatch.concatenate([batch.select(k) for k in range(batch.n_systems)])
    assert type(again) is CrystalBatch
    for f in dataclasses.fields(batch):
        np.testing.assert_array_equal(getattr(again, f.name), getattr(batch, f.name))
    sub = batch[[2, 0]]
    assert type(sub) is CrystalBatch and list(sub.atoms_per_system()) == [2, 32]
    np.testing.assert_array_equal(sub.cell[1], batch.cell[0])
    single = batch.astype(np.float32)
    assert type(single) is CrystalBatch and single.cell.dtype == np.float32
    on_cpu = batch.to("cpu")
    assert type(on_cpu) is CrystalBatch and on_cpu.device == "cpu"
    back = on_cpu.numpy()
    for name in ("positions", "cell", "numbers", "box", "system_idx"):
        np.testing.assert_array_equal(getattr(back, name), getattr(batch, name))
    with pytest.raises(ValueError, match="numbers"):  # an LJ fluid has no species
        CrystalBatch.concatenate([batch, lj_fluid(32, 0.5, 1.0, seed=1)])


def test_the_engine_reads_the_shared_state() -> None:
    """A batch, its slices and an MDState built by hand (orthorhombic box, species) give the
    same energies: the engine takes the shared state, not a copy of its layout (float64,
    same sums: equal to round-off, 1e-12 eV)."""
    batch = CrystalBatch.from_structures(_cells())
    whole = emt_evaluate(batch).energy
    parts = [emt_evaluate(batch.select(k)).energy[0] for k in range(batch.n_systems)]
    np.testing.assert_allclose(parts, whole, rtol=0, atol=1e-12)
    gold = batch.select(0)
    plain = MDState.from_arrays(
        gold.positions, gold.system_idx, box=np.diag(gold.cell[0]), dtype=np.float64,
        numbers=gold.numbers,
    )  # fmt: skip
    assert emt_evaluate(plain).energy[0] == pytest.approx(whole[0], abs=1e-12)
    with pytest.raises(ValueError, match="species"):
        emt_evaluate(lj_fluid(32, 0.5, 1.0, seed=1))


def test_the_lj_engine_refuses_a_triclinic_cell() -> None:
    """The LJ engine's cell lists are orthorhombic: a triclinic system in the shared state
    (NaN box rows, which pass any comparison against a cutoff) is refused, not run."""
    from labtwin.simulators.md.lj_warp import WarpLJ

    batch = CrystalBatch.from_structures(_cells())
    with pytest.raises(ValueError, match=r"orthorhombic boxes only; systems \[1\]"):
        WarpLJ(batch, cutoff=1.2)
    WarpLJ(batch.select([0, 2]), cutoff=1.2)  # the orthorhombic ones run
