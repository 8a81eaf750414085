"""The molecule engine against RDKit's and tblite's own functions, hostile input, crashes
and the cache."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest
from rdkit import Chem, DataStructs
from rdkit.Chem import QED, AllChem, Crippen, Descriptors, Lipinski, rdDistGeom, rdMolDescriptors
from rdkit.Chem import rdFingerprintGenerator as fpgen

from labtwin.simulators.chem import MoleculeEngine, parse_smiles
from labtwin.simulators.chem.conformers import RT_298_KCAL, ConformerSettings
from labtwin.simulators.chem.descriptors import sascorer, tanimoto
from labtwin.simulators.chem.engine import Job, measure_job
from labtwin.simulators.chem.workers import MoleculePool

# a 58-carbon ring: ETKDG takes seconds to embed 8 conformers of it (4.4 s seen here)
MACROCYCLE = "C1" + "C" * 57 + "1"
DRUGS = ["CC(=O)Oc1ccccc1C(=O)O", "CC(=O)Nc1ccc(O)cc1", "Nc1ccc(cc1)S(N)(=O)=O", "OCC(O)CO"]
BOHR = 0.529177210903  # Angstrom (CODATA 2018), written out here independently of the engine


@pytest.fixture(scope="module")
def engine():
    e = MoleculeEngine(n_workers=1)
    yield e
    e.close()


# ---- parsing -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("smiles", "message"),
    [
        ("C1CC", "unclosed ring"),
        ("C(C", "extra open parentheses"),
        ("CX", "syntax error while parsing: CX"),
        ("C(C)(C)(C)(C)C", "Explicit valence for atom # 0 C, 5, is greater than permitted"),
        ("c1cccc1", "Can't kekulize mol"),
    ],
)
def test_invalid_smiles_carry_rdkits_own_message(smiles: str, message: str) -> None:
    from rdkit import rdBase

    with rdBase.CaptureErrorLog() as log:  # what RDKit itself says about the input
        assert Chem.MolFromSmiles(smiles) is None
    assert message in log.messages
    parsed = parse_smiles(smiles)
    assert not parsed.ok and message in parsed.reason and repr(smiles) in parsed.reason
    assert "[" not in parsed.reason.split(":", 1)[1][:3]  # no timestamps left


def test_spellings_of_one_molecule_share_rdkits_canonical_smiles() -> None:
    spellings = ["CCO", "OCC", "C(O)C", "[CH3][CH2][OH]"]
    canonical = {parse_smiles(s).canonical for s in spellings}
    assert canonical == {Chem.MolToSmiles(Chem.MolFromSmiles("CCO"))}


# ---- measured values equal RDKit's and tblite's own ---------------------------------


def rdkit_descriptors(smiles: str) -> dict[str, float]:
    mol = Chem.MolFromSmiles(smiles)
    return {
        "molecular_weight": Descriptors.MolWt(mol),
        "logp": Crippen.MolLogP(mol),
        "tpsa": rdMolDescriptors.CalcTPSA(mol),
        "hbd": Lipinski.NumHDonors(mol),
        "hba": Lipinski.NumHAcceptors(mol),
        "rotatable_bonds": rdMolDescriptors.CalcNumRotatableBonds(mol),
        "rings": rdMolDescriptors.CalcNumRings(mol),
        "heavy_atoms": mol.GetNumHeavyAtoms(),
        "qed": QED.qed(mol),
        "sa_score": sascorer().calculateScore(mol),
    }


def test_descriptors_equal_rdkits_functions(engine: MoleculeEngine) -> None:
    """Measured in a worker from the canonical SMILES: equal to RDKit's functions on the
    canonical molecule exactly, and on the input as written to round-off (atom order may
    change a float sum)."""
    written = ["OC(=O)c1ccccc1OC(C)=O", *DRUGS[1:]]
    for smiles, result in zip(written, engine.measure(written, "descriptors")):
        assert result.ok and result.smiles == smiles
        assert result.values == rdkit_descriptors(result.canonical)
        for name, value in rdkit_descriptors(smiles).items():
            assert result.values[name] == pytest.approx(value, rel=1e-12)
    assert rdkit_descriptors(written[0])["qed"] == pytest.approx(0.5501, abs=1e-4)  # aspirin


def test_tanimoto_is_rdkits_on_morgan_fingerprints() -> None:
    generator = fpgen.GetMorganGenerator(radius=2, fpSize=2048)
    a, b = (Chem.MolFromSmiles(s) for s in ("CC(=O)Oc1ccccc1C(=O)O", "OC(=O)c1ccccc1O"))
    expected = DataStructs.TanimotoSimilarity(
        generator.GetFingerprint(a), generator.GetFingerprint(b)
    )
    assert tanimoto(a, b) == expected and 0.2 < expected < 0.8
    assert tanimoto(a, a) == 1.0


def rdkit_ensemble(smiles: str):
    """ETKDGv3 + MMFF94 written out with RDKit's calls: energies and the lowest geometry."""
    settings = ConformerSettings()
    mol = Chem.AddHs(Chem.MolFromSmiles(smiles))
    params = rdDistGeom.ETKDGv3()
    params.randomSeed, params.numThreads = settings.random_seed, 1
    ids = list(rdDistGeom.EmbedMultipleConfs(mol, settings.n_conformers, params))
    energies = np.array(
        [e for _, e in AllChem.MMFFOptimizeMoleculeConfs(mol, numThreads=1, maxIters=2000)]
    )
    best = int(np.argmin(energies))
    numbers = np.array([a.GetAtomicNum() for a in mol.GetAtoms()])
    return energies, numbers, mol.GetConformer(ids[best]).GetPositions()


def tblite_single_point(numbers: np.ndarray, positions_angstrom: np.ndarray) -> dict:
    from tblite.interface import Calculator

    calc = Calculator("GFN2-xTB", numbers, positions_angstrom / BOHR)
    calc.set("verbosity", 0)
    return calc.singlepoint().dict()


def test_conformer_and_xtb_values_equal_rdkit_and_tblite(engine: MoleculeEngine) -> None:
    """The same ETKDG seed and MMFF94 calls in this process give the same ensemble (one
    thread: bit for bit); tblite on its lowest conformer gives the energy to 1e-9 Eh and
    the gap and dipole to 1e-6 (tblite in this process may sum over more OpenMP threads)."""
    molecules = ["O", "C", "CCO", DRUGS[1]]
    for result in engine.measure(molecules, "xtb"):
        assert result.ok, result.reason
        energies, numbers, positions = rdkit_ensemble(result.canonical)
        above = energies - energies.min()
        weights = np.exp(-above / RT_298_KCAL)
        assert result.values["mmff_energy_min"] == energies.min()
        assert result.values["conformer_strain"] == pytest.approx(
            np.sum(weights * above) / np.sum(weights), rel=1e-12, abs=1e-12
        )
        assert result.values["conformer_spread"] == above.max()
        res = tblite_single_point(numbers, positions)
        occupied = res["orbital-occupations"] > 1.0
        homo = res["orbital-energies"][occupied].max()
        lumo = res["orbital-energies"][~occupied].min()
        assert result.values["xtb_energy"] == pytest.approx(res["energy"], abs=1e-9)
        assert result.values["xtb_gap"] == pytest.approx((lumo - homo) * 27.211386245988, abs=1e-6)
        assert result.values["xtb_dipole"] == pytest.approx(
            np.linalg.norm(res["dipole"]) * 2.541746473, abs=1e-6
        )
        assert result.n_atoms == len(numbers)


def test_small_molecules_against_published_gfn2_values(engine: MoleculeEngine) -> None:
    """Water relaxed with tblite's GFN2 gradients reproduces xtb's published GFN2-xTB
    optimum: E = -5.0705443 Eh and a HOMO-LUMO gap of 14.38 eV (xtb 6.5-6.7 outputs of
    water optimisations give -5.070544324 to -5.070544373 Eh and gaps of 14.381 to
    14.385 eV; xtb's documented properties page has -5.0703 Eh for an unrelaxed water).
    Tolerances: 2e-6 Eh for a relaxation stopped at a gradient of 1e-5 Eh/bohr (the
    energy error is quadratic in it) against xtb's looser optimiser thresholds, 0.02 eV
    for the gap, whose geometry dependence is about 1 eV/bohr. The engine's MMFF geometry
    lies within 1 mEh above the GFN2 optimum (MMFF and GFN2 bond lengths differ by
    hundredths of an Angstrom), and methane's GFN2 energy is near -4.175 Eh."""
    from scipy.optimize import minimize
    from tblite.interface import Calculator

    water, methane = engine.measure(["O", "C"], "xtb")
    _, numbers, positions = rdkit_ensemble("O")
    calc = Calculator("GFN2-xTB", numbers, positions / BOHR)
    calc.set("verbosity", 0)

    def energy_and_gradient(x: np.ndarray) -> tuple[float, np.ndarray]:
        calc.update(positions=x.reshape(-1, 3))
        res = calc.singlepoint()
        return res.get("energy"), res.get("gradient").ravel()

    opt = minimize(energy_and_gradient, (positions / BOHR).ravel(), jac=True, method="BFGS",
                   options={"gtol": 1e-5})  # fmt: skip
    res = calc.singlepoint()
    occupied = res.get("orbital-occupations") > 1.0
    gap = res.get("orbital-energies")[~occupied].min() - res.get("orbital-energies")[occupied].max()
    assert opt.fun == pytest.approx(-5.0705443, abs=2e-6)
    assert gap * 27.211386245988 == pytest.approx(14.383, abs=0.02)
    assert 0.0 < water.values["xtb_energy"] - opt.fun < 1e-3
    assert methane.values["xtb_energy"] == pytest.approx(-4.175, abs=2e-3)
    assert methane.values["xtb_dipole"] < 1e-3  # tetrahedral: no dipole


# ---- hostile input, timeouts and crashes --------------------------------------------


def test_hostile_batch_ends_within_the_timeout_and_the_rest_is_measured(
    engine: MoleculeEngine,
) -> None:
    """Each bad molecule gets its own reason; the macrocycle's embedding is stopped at the
    1 s timeout; the good molecules around them are measured as if alone."""
    shared, engine = engine, MoleculeEngine(n_workers=1, timeouts_s={"xtb": 1.0})
    batch = {
        "C" * 10_000: "SMILES of 10000 characters; at most 300 are read",
        "C1CCC2CC": "unclosed ring",
        "CCO.c1ccccc1": "2 disconnected fragments",
        MACROCYCLE: "timed out after 1 s",
        "CC(=O)O[Pt]": "element(s) Pt not allowed",
        "[Fe+2].[O-2]": "element(s) Fe not allowed",
        "[13CH3]O": "isotope labels are not allowed",
        "[CH3]": "radical electron",
        "C[N+](C)(C)C": "net charge +1",
        "C[C+](C)CC[C-](C)C": "a carbanion, a carbocation",
        "[CH3:1]CO": "atom maps",
        "C" * 61: "61 heavy atoms (at most 60)",
        "CCO": "",
        "c1ccccc1O": "",
    }
    try:
        engine.measure(["CCO"], "descriptors")  # start the worker (its start-up is not timed)
        start = time.monotonic()
        results = engine.measure(list(batch), "xtb")
        elapsed = time.monotonic() - start
    finally:
        engine.close()
    assert elapsed < 15.0  # one 1 s timeout, a new worker's start-up, and two molecules
    for (smiles, reason), result in zip(batch.items(), results):
        if reason:
            assert result.status in ("invalid", "failed") and reason in result.reason, result
            assert len(result.reason) < 300
        else:
            assert result.ok, result.reason
            (alone,) = shared.measure([smiles], "xtb")
            assert result.values == alone.values
    assert results[3].status == "failed" and results[0].status == "invalid"


def crash_on_benzene(job: Job):
    """A worker's job that ends the worker process on benzene (a test hook)."""
    if job.canonical == "c1ccccc1":
        os._exit(3)
    if job.canonical == "c1ccncc1":
        os.kill(os.getpid(), signal.SIGSEGV)
    return measure_job(job)


def test_a_crashing_worker_fails_its_molecule_and_is_replaced() -> None:
    engine = MoleculeEngine(n_workers=1, job_function=crash_on_benzene)
    try:
        results = engine.measure(["CCO", "c1ccccc1", "CCN", "c1ccncc1", "CCC"], "descriptors")
    finally:
        engine.close()
    assert [r.status for r in results] == ["ok", "failed", "ok", "failed", "ok"]
    assert results[1].reason == "the simulator process exited with code 3"
    assert results[3].reason == "the simulator process crashed (signal SIGSEGV)"
    # the first worker, and one after each crash: descriptor jobs are pulled one at a time
    # (largest first: benzene, then pyridine), so a crash loses its own molecule alone
    assert engine.pool.started_workers == 3
    assert results[2].values == measure_job(Job("CCN", "descriptors", engine.settings)).values


def test_an_idle_worker_killed_from_outside_is_replaced() -> None:
    """The out-of-memory killer may end an idle worker: the next batch starts another."""
    engine = MoleculeEngine(n_workers=1)
    try:
        (first,) = engine.measure(["CCO"], "descriptors")
        (pid,) = engine.pool.worker_pids()
        os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)
        (again,) = engine.measure(["CCN"], "descriptors")
    finally:
        engine.close()
    assert first.ok and again.ok and engine.pool.started_workers == 2


def raise_on_ethanol(job: Job):
    if job.canonical == "CCO":
        raise ZeroDivisionError("a bug in the measurement code")
    return measure_job(job)


def test_a_bug_in_the_measurement_raises_in_the_caller() -> None:
    engine = MoleculeEngine(n_workers=1, job_function=raise_on_ethanol)
    try:
        with pytest.raises(ZeroDivisionError, match="a bug"):
            engine.measure(["CCC", "CCO"], "descriptors")
    finally:
        engine.close()


def sleep_for(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def test_pool_measures_in_parallel_and_kills_only_the_stalled_job() -> None:
    pool = MoleculePool(n_workers=2)
    try:
        pool.map(sleep_for, [0.0, 0.0], timeout_s=30.0)  # both workers up
        start = time.monotonic()
        outcomes = pool.map(sleep_for, [60.0, 0.2, 0.2, 0.2], timeout_s=1.5)
        elapsed = time.monotonic() - start
    finally:
        pool.close()
    assert [o.ok for o in outcomes] == [False, True, True, True]
    assert outcomes[0].failed == "the measurement timed out after 1.5 s"
    assert [o.value for o in outcomes[1:]] == [0.2, 0.2, 0.2]
    assert elapsed < 10.0


def test_prefetched_jobs_behind_a_stalled_one_run_on_the_next_worker() -> None:
    """With a job queued behind each running one, a timeout fails only the job that ran:
    the queued ones never started, so they go to the next worker and are not failed."""
    pool = MoleculePool(n_workers=1)
    try:
        outcomes = pool.map(sleep_for, [0.0, 60.0, 0.1, 0.0], timeout_s=1.5, prefetch=2)
        restarted = pool.started_workers
    finally:
        pool.close()
    assert [o.failed for o in outcomes] == ["", "the measurement timed out after 1.5 s", "", ""]
    assert [o.value for o in outcomes] == [0.0, None, 0.1, 0.0]
    assert restarted == 2


def test_prefetch_keeps_each_worker_busy_and_the_outcomes_in_order() -> None:
    pool = MoleculePool(n_workers=2)
    try:
        delays = [0.01 * (i % 5) for i in range(40)]
        outcomes = pool.map(sleep_for, delays, timeout_s=30.0, prefetch=1)
        with pytest.raises(ValueError, match="prefetch"):
            pool.map(sleep_for, [0.0], timeout_s=1.0, prefetch=-1)
    finally:
        pool.close()
    assert [o.value for o in outcomes] == delays
    assert pool.started_workers == 2


# ---- the cache -----------------------------------------------------------------------


def test_cached_equals_recomputed_exactly(engine: MoleculeEngine) -> None:
    molecules = ["CC(=O)Nc1ccc(O)cc1", "OCC(O)CO"]
    first = engine.measure(molecules, "xtb")
    computed = engine.computed
    again = engine.measure(["OC(C)=O", *reversed(molecules)], "xtb")
    assert engine.computed == computed + 1  # only acetic acid was new
    assert again[1:] == first[::-1]
    with pytest.raises(TypeError, match="read-only"):  # a hit is the cached result itself
        again[1].values["logp"] = 99.0
    (positions,) = [a for a in again[1].structure.values() if a.dtype == np.float64]
    with pytest.raises(ValueError, match="read-only"):
        positions[0, 0] = 99.0
    assert dict(again[1].values) | {"logp": 99.0} != again[1].values  # a copy is the caller's
    assert engine.measure(molecules[-1:], "xtb")[0] == first[-1]
    fresh = MoleculeEngine(n_workers=1)  # another worker process, an empty cache
    try:
        recomputed = fresh.measure(molecules, "xtb")
    finally:
        fresh.close()
    assert recomputed == first  # every value bit for bit
    assert engine.cache_key(first[0].canonical, "xtb") != engine.cache_key(
        first[0].canonical, "descriptors"
    )
    other = MoleculeEngine(settings=engine.settings.__class__(ConformerSettings(n_conformers=3)))
    assert other.cache_key("CCO", "xtb") != engine.cache_key("CCO", "xtb")


def stereo_of_structure(result) -> str:
    """The canonical SMILES RDKit reads off a result's 3D structure (stereo from 3D)."""
    from labtwin.structures import BONDS, NUMBERS, POSITIONS

    numbers, positions, bonds = (result.structure[k] for k in (NUMBERS, POSITIONS, BONDS))
    mol = Chem.RWMol()
    for z in numbers:
        mol.AddAtom(Chem.Atom(int(z)))
    kinds = {1: Chem.BondType.SINGLE, 2: Chem.BondType.DOUBLE, 3: Chem.BondType.TRIPLE}
    kinds[4] = Chem.BondType.AROMATIC
    for i, j, order in bonds:
        mol.AddBond(int(i), int(j), kinds[int(order)])
    conformer = Chem.Conformer(len(numbers))
    for i, xyz in enumerate(np.reshape(positions, (-1, len(numbers), 3))[0]):
        conformer.SetAtomPosition(i, [float(x) for x in xyz])
    mol.AddConformer(conformer)
    Chem.SanitizeMol(mol)
    Chem.AssignStereochemistryFrom3D(mol)
    return Chem.MolToSmiles(Chem.RemoveHs(mol))


def test_enantiomers_and_unassigned_spellings_read_the_same_3d_values(
    engine: MoleculeEngine,
) -> None:
    """Propranolol's two enantiomers and its unassigned spelling were three conformer
    searches (xTB gaps 2.88, 2.57 and 2.51 eV), three draws of one molecule. Now one
    stereoisomer of each mirror pair is embedded, unassigned centres are assigned first,
    and the values are equal bit for bit; each structure shows the molecule proposed (its
    stereo read back from 3D), and the unassigned spelling's notes name what was measured.
    Diastereomers are other molecules and read otherwise (meso and chiral butanediol)."""
    r, s, unassigned = engine.measure(
        [
            "CC(C)NC[C@@H](O)COc1cccc2ccccc12",
            "CC(C)NC[C@H](O)COc1cccc2ccccc12",
            "CC(C)NCC(O)COc1cccc2ccccc12",
        ],
        "xtb",
    )
    assert r.ok and s.ok and unassigned.ok
    assert r.values == s.values == unassigned.values
    assert {stereo_of_structure(r), stereo_of_structure(s)} == {r.canonical, s.canonical}
    assert stereo_of_structure(r) == r.canonical and stereo_of_structure(s) == s.canonical
    assert not r.notes and not s.notes
    assert any("stereochemistry left unassigned" in n for n in unassigned.notes)
    meso, chiral = engine.measure(["C[C@H](O)[C@@H](C)O", "C[C@H](O)[C@H](C)O"], "xtb")
    assert meso.values["xtb_gap"] != chiral.values["xtb_gap"]
