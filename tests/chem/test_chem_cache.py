"""The molecule engine's screening memo, result cache and largest-first dispatch: a hit
gives what a recomputation gives, and the order workers take or finish jobs in changes
nothing."""

from __future__ import annotations

import copy
import json
import pickle
import time
from dataclasses import replace

import numpy as np
import pytest

from labtwin.simulators.chem import Limits, MoleculeEngine, MoleculeResult
from labtwin.simulators.chem.engine import Job, ReadOnlyDict, measure_job

ATORVASTATIN = "CC(C)c1c(C(=O)Nc2ccccc2)c(-c2ccccc2)c(-c2ccc(F)cc2)n1CC[C@@H](O)C[C@@H](O)CC(=O)O"
# small molecules in no order of size: xTB takes well under a second for each
SMALL = ["CC(=O)Nc1ccc(O)cc1", "CCO", "OCC(O)CO", "c1ccccc1O", "CC(=O)O"]
BAD = [
    "C1CC",  # unclosed ring
    "C(C)(C)(C)(C)C",  # pentavalent carbon
    "",
    "C C",
    "C" * 301,  # longer than Limits.max_smiles_chars
    "CCO.CC",  # two fragments
    "[NH4+]",  # a net charge
    "[Na]Cl",  # a metal
    123,  # not a string
    None,
]

_EXECUTED: list[str] = []  # in a worker process: the molecules it ran, in order


def measure_and_record(job: Job) -> MoleculeResult:
    """:func:`measure_job` that notes, in ``notes``, how many jobs its worker ran
    before this one (a worker lives across jobs, so this is the dispatch order)."""
    _EXECUTED.append(job.canonical)
    return replace(measure_job(job), notes=(f"rank {len(_EXECUTED)}",))


def measure_small_ones_late(job: Job) -> MoleculeResult:
    """:func:`measure_job` after a delay that is longest for the smallest molecule, so that
    workers finish in about the reverse of the order they started in."""
    time.sleep(0.3 / len(job.canonical))
    return measure_job(job)


@pytest.fixture(scope="module")
def pair():
    """A two-worker engine with the default cache and a one-worker engine with none."""
    cached, uncached = MoleculeEngine(n_workers=2), MoleculeEngine(n_workers=1, cache_size=0)
    yield cached, uncached
    cached.close()
    uncached.close()


def same_structure(a: MoleculeResult, b: MoleculeResult) -> bool:
    """``structure`` is left out of ``MoleculeResult`` equality: compare its arrays."""
    return a.structure.keys() == b.structure.keys() and all(
        np.array_equal(a.structure[k], b.structure[k]) for k in a.structure
    )


def test_a_raw_string_hit_equals_the_canonical_result(pair) -> None:
    engine, _ = pair
    engine.clear_cache()
    (canonical,) = engine.measure(["CCO"], "descriptors")
    screened, computed = engine.screened, engine.computed
    (spelled,) = engine.measure(["OCC"], "descriptors")  # a new string: screened, not measured
    assert (engine.screened, engine.computed) == (screened + 1, computed)
    (again,) = engine.measure(["OCC"], "descriptors")  # the same string: neither
    assert (engine.screened, engine.computed) == (screened + 1, computed)
    assert again == spelled and again.smiles == "OCC" and again.canonical == "CCO"
    assert replace(again, smiles="CCO") == canonical
    with pytest.raises(TypeError, match="read-only"):  # the stored answer itself: no copy
        again.values["logp"] = 99.0
    assert engine.measure(["OCC"], "descriptors")[0] == spelled


def test_strings_seen_before_are_answered_with_the_stored_results(pair) -> None:
    """A batch of strings seen before (bad ones included) gets the very results returned
    before: nothing screened or measured, nothing copied; new settings start afresh."""
    engine, _ = pair
    engine.clear_cache()
    batch = ["CCO", "OCC", "C1CC", "CCO", "c1ccccc1O"]
    first = engine.measure(batch, "descriptors")
    screened, computed = engine.screened, engine.computed
    again = engine.measure(batch[::-1], "descriptors")
    assert (engine.screened, engine.computed) == (screened, computed)
    assert all(a is b for a, b in zip(again, first[::-1]))
    assert again[2].status == "invalid" and again[0].smiles == "c1ccccc1O"
    (xtb,) = engine.measure(["CCO"], "xtb")  # another kind: its own answer
    assert xtb.kind == "xtb" and engine.computed == computed + 1
    engine.settings = replace(engine.settings)  # an equal settings object
    try:
        (hit,) = engine.measure(["OCC"], "descriptors")
    finally:
        engine.settings = replace(engine.settings)
    assert hit is not first[1] and hit == first[1]  # from the result cache, not the answers
    assert engine.computed == computed + 1


def test_spellings_of_one_molecule_share_one_canonical_entry(pair) -> None:
    engine, _ = pair
    engine.clear_cache()
    spellings = ["CCO", "OCC", "C(O)C", "[CH3][CH2][OH]", "OCC"]
    screened, computed = engine.screened, engine.computed
    results = engine.measure(spellings, "descriptors")
    assert (engine.screened, engine.computed) == (screened + 4, computed + 1)
    assert len(engine._cache) == 1 and len(engine._memo) == 4
    assert {r.canonical for r in results} == {"CCO"}
    assert all(replace(r, smiles="") == replace(results[0], smiles="") for r in results)
    small = MoleculeEngine(n_workers=1, cache_size=2)  # memo bounded at 4 x 2 strings
    try:
        small.measure(["C" * n for n in range(1, 11)], "descriptors")
        assert len(small._memo) == 8 and len(small._cache) == 2
        screened = small.screened
        small.measure(["C"], "descriptors")  # dropped from both: screened and measured again
        assert small.screened == screened + 1
    finally:
        small.close()


def test_cached_and_uncached_results_are_identical_in_any_order(pair) -> None:
    cached, uncached = pair
    cached.clear_cache()
    first = cached.measure(SMALL, "xtb")
    assert all(r.ok and r.structure for r in first), [r.reason for r in first]
    computed = cached.computed
    hits = cached.measure(SMALL[::-1], "xtb")
    assert cached.computed == computed and hits == first[::-1]
    assert all(same_structure(a, b) for a, b in zip(hits, first[::-1]))
    cached.clear_cache()
    shuffled = [SMALL[i] for i in (3, 0, 4, 2, 1)]
    recomputed = cached.measure(shuffled, "xtb")  # two workers, another dispatch order
    assert cached.computed == computed + len(SMALL)
    by_smiles = {r.smiles: r for r in first}
    assert all(
        r == by_smiles[r.smiles] and same_structure(r, by_smiles[r.smiles]) for r in recomputed
    )
    for _ in range(2):  # no cache: every call recomputes, one worker, input order
        alone = uncached.measure(SMALL, "xtb")
        assert alone == first and all(same_structure(a, b) for a, b in zip(alone, first))
    assert len(uncached._cache) == 0 and uncached.computed == 2 * len(SMALL)


def test_jobs_go_out_largest_first_and_results_come_back_in_input_order() -> None:
    batch = ["CCO", ATORVASTATIN, "c1ccccc1", "CC(=O)Nc1ccc(O)cc1", "OCC(O)CO"]
    recording = MoleculeEngine(n_workers=1, job_function=measure_and_record)
    late = MoleculeEngine(n_workers=2, job_function=measure_small_ones_late)
    plain = MoleculeEngine(n_workers=1, cache_size=0)
    try:
        recorded = recording.measure(batch, "descriptors")
        reference = plain.measure(batch, "descriptors")
        finished_late = late.measure(batch, "descriptors")
    finally:
        recording.close()
        late.close()
        plain.close()
    # the caller's size estimate is the worker's atom count; the largest ran first
    sizes = [r.n_atoms for r in recorded]
    assert sizes == [9, 76, 12, 20, 14]
    ranks = [int(r.notes[0].split()[1]) for r in recorded]
    assert [sizes[i] for i in np.argsort(ranks)] == sorted(sizes, reverse=True)
    assert [replace(r, notes=()) for r in recorded] == reference
    assert [r.smiles for r in finished_late] == batch and finished_late == reference


def test_bad_smiles_give_the_same_invalid_reasons_from_the_memo(pair) -> None:
    engine, _ = pair
    engine.clear_cache()
    fresh = [engine.screen(s) for s in BAD]  # screening without the memo
    assert all(isinstance(r, MoleculeResult) and r.status == "invalid" for r in fresh)
    computed = engine.computed
    first = engine.measure(BAD, "descriptors")
    screened = engine.screened
    again = engine.measure(BAD, "descriptors")
    assert engine.screened == screened + 2  # only the two non-strings are screened again
    assert first == again == fresh
    assert "unclosed ring" in first[0].reason and "net charge +1" in first[6].reason
    assert engine.computed == computed  # nothing invalid reaches a worker
    # the memo belongs to the screening limits: new limits screen every string again
    (ok,) = engine.measure(["CCCC"], "descriptors")
    engine.settings = replace(engine.settings, limits=Limits(max_heavy_atoms=3))
    try:
        (refused,) = engine.measure(["CCCC"], "descriptors")
    finally:
        engine.settings = replace(engine.settings, limits=Limits())
    assert ok.ok and refused.status == "invalid" and "4 heavy atoms (at most 3)" in refused.reason
    computed = engine.computed
    assert engine.measure(["CCCC"], "descriptors")[0] == ok  # equal settings again: a hit
    assert engine.computed == computed


# ---- screening in the workers ------------------------------------------------------------

SPELLINGS = [
    "OCC",
    "C(O)C",
    "[CH3][CH2][OH]",
    "c1ccccc1",
    "C1=CC=CC=C1",
    "CC(C)Cc1ccc(cc1)C(C)C(=O)O",
]


def test_screening_in_the_workers_equals_screening_in_the_caller(pair) -> None:
    """A two-worker engine screens a batch of new strings in its workers (in chunks); the
    results equal a one-worker engine's, which screens them itself, bad inputs included."""
    cached, uncached = pair
    cached.clear_cache()
    batch = [*SMALL, *BAD, *SPELLINGS, "OCC"]
    new = len({s for s in batch if type(s) is str})
    assert new >= 4 * cached.pool.n_workers  # enough to go to the workers
    screened = cached.screened
    together = cached.measure(batch, "descriptors")
    assert cached.screened == screened + new + 2  # each string once; 123 and None each
    assert together == uncached.measure(batch, "descriptors")
    assert [r.status for r in together].count("invalid") == len(BAD)
    assert len(cached._memo) == new
    assert cached.measure(batch, "descriptors") == together  # the memo's and cache's answer
    assert cached.screened == screened + new + 4  # only the two non-strings again


def crash_screening_benzene(job):
    """:func:`screen_chunk` that ends its worker on a chunk holding benzene (a test hook)."""
    import os

    from labtwin.simulators.chem.engine import screen_chunk

    if "c1ccccc1" in job[0]:
        os._exit(3)
    return screen_chunk(job)


def test_a_worker_lost_while_screening_fails_only_that_input() -> None:
    engine = MoleculeEngine(n_workers=2, screen_function=crash_screening_benzene)
    reference = MoleculeEngine(n_workers=1)
    try:
        batch = [*SMALL, *SPELLINGS]
        results = engine.measure(batch, "descriptors")
        expected = reference.measure(batch, "descriptors")
        lost = batch.index("c1ccccc1")
        assert results[lost].status == "failed"
        assert results[lost].reason == "the simulator process exited with code 3"
        assert results[:lost] + results[lost + 1 :] == expected[:lost] + expected[lost + 1 :]
        assert "c1ccccc1" not in engine._memo  # a lost worker is not a screening to keep
    finally:
        engine.close()
        reference.close()


def test_a_read_only_result_pickles_copies_and_serialises(pair) -> None:
    """What the engine hands out travels (pickle: Ray, worker isolation; deepcopy; JSON)
    and stays read-only; ``dict(values)`` is the caller's own copy to change."""
    engine, _ = pair
    (result,) = engine.measure(["CC(=O)Nc1ccc(O)cc1"], "descriptors")
    for travelled in (pickle.loads(pickle.dumps(result)), copy.deepcopy(result)):
        assert travelled == result and type(travelled.values) is ReadOnlyDict
        with pytest.raises(TypeError, match="read-only"):
            travelled.values.update(logp=99.0)
    assert json.loads(json.dumps(result.values)) == result.values
    own = dict(result.values)
    own["logp"] = 99.0
    assert (
        result.values["logp"] != 99.0
        and engine.measure(["CC(=O)Nc1ccc(O)cc1"], "descriptors")[0] == result
    )
