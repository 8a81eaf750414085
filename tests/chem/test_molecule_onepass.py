"""The molecule engine's one pass for descriptors: with two workers, a batch of new SMILES is
screened and measured in the workers in one round (``ScreenAndMeasure``, the jobs pulled
from the pool's shared queue), with
every guarantee of the two-round path: the same results bit for bit, one answer to two
spellings of a molecule, a crash, a stall or an invalid string failing only its input, and
cached results equal to recomputed ones."""

from __future__ import annotations

import os
import time
from dataclasses import replace

import pytest

import labtwin.simulators.chem.engine as engine_module
from labtwin.simulators.chem import MoleculeEngine, MoleculeSettings
from labtwin.simulators.chem.engine import (
    ONE_PASS,
    ONE_PASS_MIN,
    Job,
    ScreenAndMeasure,
    Screened,
    measure_job,
    screen_chunk,
)

# drug-like molecules, none of them two spellings of one molecule
DRUGS = [
    "CC(=O)Oc1ccccc1C(=O)O",
    "CC(C)Cc1ccc(cc1)C(C)C(=O)O",
    "CC(=O)Nc1ccc(O)cc1",
    "Cn1cnc2c1c(=O)n(C)c(=O)n2C",
    "CN(C)C(=N)NC(=N)N",
    "CN1CCC[C@H]1c1cccnc1",
    "Nc1ccc(cc1)S(N)(=O)=O",
    "NNC(=O)c1ccncc1",
    "CCN(CC)CC(=O)Nc1c(C)cccc1C",
    "COc1cc(Cc2cnc(N)nc2N)cc(OC)c1OC",
    "CC(C)NCC(O)COc1cccc2ccccc12",
    "Cc1ncc([N+](=O)[O-])n1CCO",
    "OC(=O)Cc1ccccc1Nc1c(Cl)cccc1Cl",
    "CN1C(=O)CN=C(c2ccccc2)c2cc(Cl)ccc21",
]
BENZENE = "c1ccccc1"
#: benzene written long enough to go first (dispatch goes by a string's length), so that the
#: other worker measures the rest while its own is lost
LONG_BENZENE = "[cH+0]1[cH+0][cH+0][cH+0][cH+0][cH+0]1"


@pytest.fixture(scope="module")
def engines():
    """A two-worker engine (the one pass) and a one-worker engine without a cache (the
    caller screens, then one round of measurements)."""
    two, one = MoleculeEngine(n_workers=2), MoleculeEngine(n_workers=1, cache_size=0)
    yield two, one
    two.close()
    one.close()


def test_a_batch_of_new_strings_takes_the_one_pass_only_with_two_workers(engines) -> None:
    two, one = engines
    two.clear_cache()
    assert "descriptors" in ONE_PASS and "xtb" not in ONE_PASS
    assert len(DRUGS) >= ONE_PASS_MIN * two.pool.n_workers
    assert list(two._one_pass_strings(DRUGS, "descriptors")) == DRUGS
    assert two._one_pass_strings(DRUGS, "xtb") == {}
    assert two._one_pass_strings(DRUGS[: 2 * ONE_PASS_MIN - 1], "descriptors") == {}
    assert one._one_pass_strings(DRUGS, "descriptors") == {}


def test_one_pass_results_equal_the_two_round_path_and_the_job_in_process(
    engines, monkeypatch
) -> None:
    two, one = engines
    two.clear_cache()
    batch = [*DRUGS, "C1CC", BENZENE]
    screened, computed = two.screened, two.computed
    together = two.measure(batch, "descriptors")
    assert (two.screened, two.computed) == (screened + len(batch), computed + len(batch) - 1)
    assert all(r.ok for r in together[:-2] + together[-1:])
    assert together == one.measure(batch, "descriptors")
    monkeypatch.setattr(engine_module, "ONE_PASS", frozenset())  # two rounds, two workers
    two.clear_cache()
    assert two._one_pass_strings(batch, "descriptors") == {}
    assert two.measure(batch, "descriptors") == together
    for smiles, result in zip(batch, together):  # and the job run in this process
        if result.ok:
            direct = measure_job(Job(result.canonical, "descriptors", two.settings))
            assert replace(direct, smiles=smiles) == result


def test_the_worker_function_is_the_screening_and_the_job_of_the_two_round_path() -> None:
    """In this process, :class:`ScreenAndMeasure` gives the screening of ``screen_chunk``
    and the result of ``measure_job`` from the canonical SMILES."""
    settings = MoleculeSettings()
    one_pass = ScreenAndMeasure(measure_job, screen_chunk, "descriptors", settings)
    screening, result = one_pass("OC(=O)c1ccccc1OC(C)=O")  # aspirin, another spelling
    assert screening == screen_chunk((["OC(=O)c1ccccc1OC(C)=O"], settings.limits))[0]
    assert isinstance(screening, Screened) and screening.canonical == "CC(=O)Oc1ccccc1C(=O)O"
    assert result == measure_job(Job(screening.canonical, "descriptors", settings))
    assert one_pass(screening) == (None, result)  # screened before: measured alone
    invalid, nothing = one_pass("C(C)(C)(C)(C)C")
    assert nothing is None and invalid.status == "invalid" and "valence" in invalid.reason


def test_two_spellings_in_one_batch_get_one_answer(engines) -> None:
    two, _ = engines
    two.clear_cache()
    spellings = ["CC(=O)Oc1ccccc1C(=O)O", "OC(=O)c1ccccc1OC(C)=O", BENZENE, "C1=CC=CC=C1"]
    batch = [*spellings, *DRUGS[1:]]
    results = two.measure(batch, "descriptors")
    assert all(r.ok for r in results)
    aspirin, aspirin_too, benzene, benzene_too = results[:4]
    assert aspirin.canonical == aspirin_too.canonical == "CC(=O)Oc1ccccc1C(=O)O"
    assert benzene.canonical == benzene_too.canonical == BENZENE
    # the result cached first answers both: the same stored values, the input's own smiles
    assert aspirin.values is aspirin_too.values and benzene.values is benzene_too.values
    assert replace(aspirin_too, smiles=aspirin.smiles) == aspirin
    assert aspirin_too.smiles == "OC(=O)c1ccccc1OC(C)=O"
    assert len(two._cache) == len(batch) - 2 and len(two._memo) == len(batch)


def test_a_new_spelling_of_a_cached_molecule_gets_the_cached_result(engines) -> None:
    """The worker measures it again (it does not know the cache); the caller answers with
    the result cached before, which equals what the worker measured."""
    two, _ = engines
    two.clear_cache()
    (cached,) = two.measure(["CC(=O)Oc1ccccc1C(=O)O"], "descriptors")
    computed = two.computed
    batch = ["OC(=O)c1ccccc1OC(C)=O", *DRUGS[1:]]
    results = two.measure(batch, "descriptors")
    assert two.computed == computed + len(batch)  # measured again in its worker
    assert results[0].values is cached.values and results[0].smiles == batch[0]
    assert len(two._cache) == len(DRUGS)


def test_invalid_strings_in_a_one_pass_batch_get_the_screenings_reasons(engines) -> None:
    two, _ = engines
    two.clear_cache()
    bad = ["C1CC", "C(C)(C)(C)(C)C", "CCO.CC", "[NH4+]", "[Na]Cl", "C C", ""]
    batch = [*DRUGS[:4], *bad, *DRUGS[4:]]
    computed = two.computed
    results = two.measure(batch, "descriptors")
    assert two.computed == computed + len(DRUGS)  # nothing invalid is measured
    assert results[4 : 4 + len(bad)] == [two.screen(s) for s in bad]  # as in the caller
    assert [r.status for r in results].count("invalid") == len(bad)
    assert "unclosed ring" in results[4].reason and "net charge +1" in results[7].reason
    assert all(r.ok for r in results[:4] + results[4 + len(bad) :])
    screened = two.screened
    assert two.measure(batch, "descriptors") == results  # answers: nothing screened again
    assert two.screened == screened


def crash_on_benzene(job: Job):
    """:func:`measure_job` that ends its worker on benzene (a native crash; a test hook)."""
    if job.canonical == BENZENE:
        os._exit(3)
    return measure_job(job)


def stall_on_benzene(job: Job):
    """:func:`measure_job` that hangs on benzene (a test hook)."""
    if job.canonical == BENZENE:
        time.sleep(60.0)
    return measure_job(job)


def crash_screening_benzene(job):
    """:func:`screen_chunk` that ends its worker on benzene written as :data:`BENZENE` or
    :data:`LONG_BENZENE` (a test hook)."""
    if BENZENE in job[0] or LONG_BENZENE in job[0]:
        os._exit(3)
    return screen_chunk(job)


@pytest.mark.parametrize(
    ("hook", "reason"),
    [
        ({"job_function": crash_on_benzene}, "the simulator process exited with code 3"),
        ({"screen_function": crash_screening_benzene}, "the simulator process exited with code 3"),
        (
            {"job_function": stall_on_benzene, "timeouts_s": {"descriptors": 0.5}},
            "the measurement timed out after 0.5 s",
        ),
    ],
    ids=["crash measuring", "crash screening", "stall"],
)
def test_a_lost_worker_in_the_one_pass_fails_only_that_molecule(engines, hook, reason) -> None:
    """A crash or a stall, while screening or while measuring, fails the molecule that
    caused it, with the reason; the rest of the batch is measured and equals the
    reference, and the lost one is neither remembered nor cached."""
    _, one = engines
    engine = MoleculeEngine(n_workers=2, **hook)
    batch = [*DRUGS[:7], LONG_BENZENE, "C1CC", *DRUGS[7:]]
    lost = batch.index(LONG_BENZENE)
    assert max(batch, key=len) == LONG_BENZENE  # the first job a worker takes
    try:
        start = time.monotonic()
        results = engine.measure(batch, "descriptors")
        elapsed = time.monotonic() - start
        assert results[lost].status == "failed" and results[lost].reason == reason
        assert results[lost].smiles == LONG_BENZENE
        expected = one.measure(batch, "descriptors")
        assert results[:lost] + results[lost + 1 :] == expected[:lost] + expected[lost + 1 :]
        assert LONG_BENZENE not in engine._memo
        assert LONG_BENZENE not in engine._hits["descriptors"]
        assert all(key[0] != BENZENE for key in engine._cache)
        assert elapsed < 10.0  # a stall: its own timeout, and the rest on the other worker
    finally:
        engine.close()


def test_cached_equals_recomputed_through_the_one_pass(engines) -> None:
    two, one = engines
    two.clear_cache()
    first = two.measure(DRUGS, "descriptors")
    computed = two.computed
    hits = two.measure(DRUGS[::-1], "descriptors")
    assert two.computed == computed and hits == first[::-1]
    two.clear_cache()
    shuffled = DRUGS[1::2] + DRUGS[::2]  # another dispatch and another chunking
    recomputed = two.measure(shuffled, "descriptors")
    assert two.computed == computed + len(DRUGS)
    by_smiles = {r.smiles: r for r in first}
    assert all(r == by_smiles[r.smiles] for r in recomputed)
    assert one.measure(DRUGS, "descriptors") == first


def test_molecules_screened_before_but_not_cached_go_in_the_same_pass() -> None:
    """Strings screened before whose descriptors are not cached (the screening memo holds
    them from an xtb batch) and new strings, a new spelling of one of the former among
    them: one pass measures both (the first alone, the second screened too), and the two
    spellings get one answer."""
    engine = MoleculeEngine(n_workers=2, job_function=descriptors_labelled_xtb)
    reference = MoleculeEngine(n_workers=1, cache_size=0)
    try:
        old, new = DRUGS[:6], [*DRUGS[6:], "OC(=O)c1ccccc1OC(C)=O"]  # aspirin, again
        assert all(r.ok for r in engine.measure(old, "xtb"))
        assert all(s in engine._memo for s in old)
        screened, computed = engine.screened, engine.computed
        batch = [*old, *new]
        assert list(engine._one_pass_strings(batch, "descriptors")) == new
        results = engine.measure(batch, "descriptors")
        assert engine.screened == screened + len(new)
        assert engine.computed == computed + len(batch)
        assert results == reference.measure(batch, "descriptors")
        assert results[0].values is results[-1].values
    finally:
        engine.close()
        reference.close()


def descriptors_labelled_xtb(job: Job):
    """The descriptors job under the label of kind ``"xtb"`` (milliseconds, not seconds: a
    test of the two-round path for a kind that is not screened and measured in one pass)."""
    return replace(measure_job(replace(job, kind="descriptors")), kind=job.kind)


def test_other_kinds_keep_the_screening_round_in_the_workers() -> None:
    engine = MoleculeEngine(
        n_workers=2, job_function=descriptors_labelled_xtb, screen_function=crash_screening_benzene
    )
    try:
        batch = [*DRUGS[:7], BENZENE, *DRUGS[7:]]
        assert engine._one_pass_strings(batch, "xtb") == {}
        results = engine.measure(batch, "xtb")
        lost = batch.index(BENZENE)
        assert results[lost].status == "failed" and BENZENE not in engine._memo
        assert all(r.ok and r.kind == "xtb" for r in results[:lost] + results[lost + 1 :])
        assert len(engine._memo) == len(DRUGS)  # screened in the workers, into the memo
    finally:
        engine.close()
