"""Every lab with a structure records it in :mod:`labtwin.structures`' format, the physics
in it is sane, it survives the run store, and the lab's frames draw it.

Each lab runs at its cheapest settings, one or two experiments: the structure is the
point, not the measurement (those have their own tests).
"""

from __future__ import annotations

import numpy as np
import pytest

import labtwin
from labtwin.campaign import Record
from labtwin.frames import FRAME_SIZE, StructurePanel, lab_frame
from labtwin.runs import RunStore, load
from labtwin.structures import Structure, has_structure, read_structure, run_structure

LJ_MINIMUM = 2 ** (1 / 6)  # sigma: the pair potential's minimum


def records(*measurements) -> list[Record]:
    return [Record(0, k, "experiment", m, 0.5, 0.0) for k, m in enumerate(measurements)]


def round_trip(tmp_path, measurement) -> Structure:
    """The measurement's structure written by the run store and read back from disk."""
    with RunStore(tmp_path / "run") as store:
        store.record(records(measurement)[0])
    run = load(tmp_path / "run")
    structure = run_structure(run, run.record_lines[0])
    expected = read_structure(measurement.artifacts)
    for name in ("numbers", "positions", "cell", "bonds"):
        a, b = getattr(structure, name), getattr(expected, name)
        assert (a is None) == (b is None), name
        if a is not None:
            np.testing.assert_array_equal(a, b, err_msg=name)
    return structure


def panel_of(lab, *measurements) -> np.ndarray:
    """The right half of the lab's frame after these measurements (its structure panel)."""
    history = records(*measurements)
    panel = lab.frame_panel(history, {})
    assert isinstance(panel, StructurePanel) and panel.point == len(measurements) - 1
    frame = lab_frame(lab.id, [(0.5, "ok")] * len(history), lab.budget, panel)
    assert frame.shape == (FRAME_SIZE[1], FRAME_SIZE[0], 3) and frame.dtype == np.uint8
    half = frame[:, FRAME_SIZE[0] // 2 :]
    assert (half.min(axis=2) < 250).sum() > 2000, "the structure panel is blank"
    return half


def nearest_neighbour(positions: np.ndarray, cell: np.ndarray | None = None) -> np.ndarray:
    """Each atom's nearest-neighbour distance (minimum image in a cubic cell)."""
    d = positions[:, None, :] - positions[None, :, :]
    if cell is not None:
        edge = np.diag(cell)
        d -= edge * np.round(d / edge)
    r = np.linalg.norm(d, axis=-1)
    np.fill_diagonal(r, np.inf)
    return r.min(axis=1)


def lj_energy(positions: np.ndarray) -> float:
    """Full Lennard-Jones energy of a cluster (epsilon = sigma = 1)."""
    i, j = np.triu_indices(len(positions), k=1)
    r2 = ((positions[i] - positions[j]) ** 2).sum(axis=1)
    return float(np.sum(4.0 * (r2**-6 - r2**-3)))


def test_lj_cluster_records_its_anneal_and_the_quenched_minimum(tmp_path) -> None:
    """Frames: the random start, the end of each stage, the quenched minimum (whose LJ energy
    is the measured one, to the float32 quench's 2e-4 epsilon plus rounding)."""
    lab = labtwin.load_task("LJClusterAnneal-v0")
    schedule = {"start_temperature": 0.3, "end_temperature": 0.02, "n_stages": 6}
    first, second = lab.measure([schedule, schedule], seed=5)
    s = read_structure(first.artifacts)
    assert s.n_atoms == 13 and s.n_frames == 6 + 2 and not s.periodic and s.bonds is None
    assert np.all(s.numbers == 0)  # pseudo-atoms, positions in sigma
    assert nearest_neighbour(s.positions[0]).min() >= 1.0  # the start keeps atoms 1 sigma apart
    final = s.positions[-1]
    assert lj_energy(final) == pytest.approx(first["energy"], abs=1e-3)
    # a bound LJ13 minimum: every atom sits near the pair minimum of its nearest neighbour
    np.testing.assert_allclose(nearest_neighbour(final), LJ_MINIMUM, rtol=0.05)
    round_trip(tmp_path, first)
    # another anneal, another structure, another picture
    assert not np.allclose(read_structure(second.artifacts).positions[-1], final)
    assert not np.array_equal(panel_of(lab, first), panel_of(lab, first, second))


def test_lj_box_records_frames_of_one_replica_in_its_cubic_cell(tmp_path) -> None:
    lab = labtwin.load_task("LJEquationOfState-v2", equilibration_steps=100)
    experiment = {"temperature": 1.5, "density": 0.6, "production_steps": 200}
    (m,) = lab.measure([experiment], seed=2)
    s = read_structure(m.artifacts)
    assert s.n_atoms == 108 and s.n_frames == 8 and np.all(s.numbers == 0)
    positions, cell = s.frame(-1)
    edge = (108 / 0.6) ** (1 / 3)  # N / V = rho*: the box of the experiment (float32 box)
    np.testing.assert_allclose(cell, edge * np.eye(3), rtol=1e-6)
    assert np.all((s.positions >= 0) & (s.positions < edge))  # wrapped into the cell
    # a fluid at T* = 1.5: no two atoms inside the repulsive wall
    assert nearest_neighbour(positions, cell).min() > 0.8
    assert not np.allclose(s.positions[0], s.positions[-1])  # the frames move
    assert "series_t_T_P_U" in m.artifacts  # the time series stay
    round_trip(tmp_path, m)
    panel_of(lab, m)


def test_molecule_design_records_the_conformer_xtb_measured(tmp_path) -> None:
    """The conformer is the geometry of the xTB single point (its energy recomputes to
    1e-8 Eh: the same deterministic calculation), with RDKit's bonds and orders."""
    from rdkit import Chem

    from labtwin.simulators.chem.xtb import gfn2_single_point

    lab = labtwin.load_task("MoleculeDesign-v2")
    smiles = "CC(=O)Oc1ccccc1C(=O)O"  # aspirin
    xtb, descriptors = lab.measure(
        [{"smiles": smiles, "kind": "xtb"}, {"smiles": smiles, "kind": "descriptors"}]
    )
    assert xtb.ok and descriptors.ok
    assert not has_structure(descriptors.artifacts)  # no conformer was embedded for it
    s = read_structure(xtb.artifacts)
    mol = Chem.AddHs(Chem.MolFromSmiles(smiles))
    assert s.numbers.tolist() == [a.GetAtomicNum() for a in mol.GetAtoms()]
    assert len(s.bonds) == mol.GetNumBonds()
    orders = s.bonds[:, 2].tolist()
    assert orders.count(4) == 6 and orders.count(2) == 2  # the ring; two C=O
    positions = s.positions[0]
    lengths = np.linalg.norm(positions[s.bonds[:, 0]] - positions[s.bonds[:, 1]], axis=1)
    assert np.all((lengths > 0.95) & (lengths < 1.55))  # C-H 1.09 ... C-O 1.36 Å
    energy = gfn2_single_point(s.numbers, positions)["xtb_energy"]
    assert energy == pytest.approx(xtb["xtb_energy"], abs=1e-8)
    round_trip(tmp_path, xtb)
    (other,) = lab.measure([{"smiles": "c1ccncc1", "kind": "xtb"}])
    assert not np.array_equal(panel_of(lab, xtb), panel_of(lab, xtb, other))


def test_synthesis_records_the_product_conformer(tmp_path) -> None:
    from rdkit import Chem

    lab = labtwin.load_task("SynthesisPlanning-v1")
    experiment = lab.random_experiment(np.random.default_rng(4))
    (m,) = lab.measure([experiment])
    assert m.ok, m.reason
    s = read_structure(m.artifacts)
    product = Chem.AddHs(Chem.MolFromSmiles(m.provenance["product"]))
    assert s.numbers.tolist() == [a.GetAtomicNum() for a in product.GetAtoms()]
    assert len(s.bonds) == product.GetNumBonds()
    positions = s.positions[0]
    lengths = np.linalg.norm(positions[s.bonds[:, 0]] - positions[s.bonds[:, 1]], axis=1)
    assert np.all((lengths > 0.9) & (lengths < 2.0))  # up to C-Br 1.94 Å
    (again,) = lab.measure([experiment])  # the same product, the same conformer
    np.testing.assert_array_equal(again.artifacts["structure_positions"], positions)
    round_trip(tmp_path, m)
    panel_of(lab, m)


def test_alloy_records_its_relaxed_cell(tmp_path) -> None:
    """Cell volume over atoms is the measured volume per atom (the same relaxed cell)."""
    lab = labtwin.load_task("AlloyDesign-v2")
    cell = {
        "pair": "Cu-Pd",
        "lattice": "fcc",
        "ordering": "ordered",
        "fraction_B": 0.25,
        "repeats": 1,
        "ordering_seed": 0,
    }
    (m,) = lab.measure([cell])
    assert m.ok, m.reason
    s = read_structure(m.artifacts)
    positions, lattice = s.frame()
    assert s.n_atoms == 4 and sorted(s.numbers.tolist()) == [29, 29, 29, 46]  # Cu3Pd
    volume = abs(np.linalg.det(lattice))
    assert volume / s.n_atoms == pytest.approx(m["volume_per_atom_A3"], rel=1e-12)
    fractional = positions @ np.linalg.inv(lattice)
    assert np.all((fractional > -0.05) & (fractional < 1.05))  # the atoms are in their cell
    round_trip(tmp_path, m)
    (bcc,) = lab.measure([{**cell, "lattice": "bcc", "fraction_B": 0.5}])
    assert not np.array_equal(panel_of(lab, m), panel_of(lab, m, bcc))


def test_water_box_records_rigid_tip3p_molecules_in_their_cell(tmp_path) -> None:
    """One experiment at the stock's root state (298.75 K, 1 bar) with the light settings of
    the check_lab test. Rigid TIP3P: O-H 0.9572 Å, H-O-H 104.52 degrees (so H-H 1.5139 Å),
    held by OpenMM's SETTLE to far below the 1e-3 Å tolerance used here; each frame is a
    production sample of replica 0, whose box volume is the one its density was read from."""
    lab = labtwin.load_task(
        "WaterDensity-v2", n_replicas=2, equilibration_ps=0.1, stock_ps=(0.5, 0.25)
    )
    experiment = {"temperature_K": 298.75, "pressure_bar": 1.0, "production_ps": 0.25}
    (m,) = lab.measure([experiment], seed=0)
    assert m.ok, m.reason
    s = read_structure(m.artifacts)
    n_waters = s.n_atoms // 3
    assert s.numbers.tolist() == [8, 1, 1] * n_waters
    assert s.n_frames == m.artifacts["density_series"].shape[1] == 5
    oxygen, hydrogen = s.bonds[:, 0], s.bonds[:, 1]
    assert len(s.bonds) == 2 * n_waters and np.all(s.numbers[oxygen] == 8)
    assert np.all(s.numbers[hydrogen] == 1)
    for frame in range(s.n_frames):
        positions, cell = s.frame(frame)
        oh = np.linalg.norm(positions[hydrogen] - positions[oxygen], axis=1)
        np.testing.assert_allclose(oh, 0.9572, atol=1e-3)
        hh = np.linalg.norm(positions[1::3] - positions[2::3], axis=1)
        np.testing.assert_allclose(hh, 2 * 0.9572 * np.sin(np.radians(104.52) / 2), atol=1e-3)
        edge = np.diag(cell)
        assert np.allclose(cell, np.diag(edge))  # the cubic NPT box
        assert np.all((positions > -1.0) & (positions < edge + 1.0))  # molecules kept whole
        mass_amu = n_waters * (15.99943 + 2 * 1.007947)
        density = mass_amu / (np.prod(edge) / 1000.0) * 1.66053907e-3  # g/cm^3 from Å^3
        assert density == pytest.approx(m.artifacts["density_series"][0, frame], rel=1e-5)
    round_trip(tmp_path, m)
    panel_of(lab, m)
