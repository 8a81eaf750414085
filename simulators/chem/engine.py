"""The molecule engine: SMILES in, measured properties out, in worker processes, cached.

:meth:`MoleculeEngine.measure` takes a batch of SMILES and a measurement kind:

- ``"descriptors"`` — the RDKit descriptors of :mod:`~labtwin.simulators.chem.descriptors`
  and the structural alerts of :func:`~labtwin.simulators.chem.molecule.structural_alerts`;
- ``"xtb"`` — those, plus an ETKDG/MMFF94 conformer ensemble
  (:mod:`~labtwin.simulators.chem.conformers`) and a GFN2-xTB single point on its
  lowest-energy conformer (:mod:`~labtwin.simulators.chem.xtb`). The ensemble is that of
  :func:`~labtwin.simulators.chem.molecule.stereo_form`'s stereoisomer (unassigned
  stereocentres assigned, one of each mirror pair), so that the two enantiomers and the
  unassigned spelling of a molecule read the same values; a mirrored molecule's structure
  is the reflection.

:meth:`MoleculeEngine.reaction_energy` adds up such ``"xtb"`` measurements into a reaction
energy, products minus reagents (:mod:`~labtwin.simulators.chem.reaction_energy`).

Each SMILES is parsed, sanitised, canonicalised and screened
(:mod:`~labtwin.simulators.chem.molecule`: cheap, and needed for the cache key); what
fails there is ``invalid`` with the reason. The calling process screens a few new
strings itself; with two or more workers and a batch of many new strings it screens them
in the workers, in chunks (a native crash there fails that one input; the same screening
either way), and for the ``"descriptors"`` kind (:data:`ONE_PASS`) a worker screens and
measures each string of its message in one round trip (:class:`ScreenAndMeasure`), so
that no worker waits for the whole batch's screening before it measures. The rest is
measured in a
:class:`~labtwin.simulators.chem.workers.MoleculePool`, each molecule a job with a per-kind
timeout, from its canonical SMILES, so a result is a function of
``(canonical SMILES, kind, settings)`` alone. A batch's jobs are dispatched largest
molecule first (atoms with hydrogens: longest-processing-time-first, so that workers
finish together); descriptor jobs (milliseconds each) are not sent one a message: every
worker gets the batch once and takes its molecules one at a time from a shared queue
(:data:`PULL_KINDS`), so none waits for the caller between molecules; results come back
in input order whatever order the workers finish in.
A molecule whose worker crashed or ran out of time is ``failed`` with the reason; its
batch-mates are measured all the same (the rest of a lost chunk is measured again, one
molecule a message).

Three caches, all bounded (least recently used entries dropped first):

- the **screening memo** maps a SMILES exactly as written to what screening made of it
  (its canonical SMILES and size, or its ``invalid`` result): screening is a pure function
  of the string and ``settings.limits``, so a string seen before skips RDKit altogether;
- the **result cache** holds ``ok`` results under ``(canonical SMILES, kind, settings)``
  (never failures, which depend on the machine's load), so two spellings of one molecule
  share one entry;
- the **answers** map a string exactly as written and a kind to the result
  :meth:`MoleculeEngine.measure` returned for it (``ok`` or ``invalid``, for the current
  ``settings`` object): a batch of strings seen before is answered from it alone.

Results are read-only (:class:`ReadOnlyDict` values and structure, arrays not writeable),
so every cache hands out the stored result itself, never a copy: a cache hit is one
dictionary look-up. Every computation is deterministic (fixed embedding seed, one
thread), so a cached result equals a recomputed one exactly; a lab that adds measurement
noise draws it per experiment after the cache, on its own copy of the values.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import numpy as np

from labtwin.readonly import ReadOnlyDict as _ReadOnlyDict
from labtwin.simulators.chem.conformers import (
    ConformerError,
    ConformerSettings,
    conformer_ensemble,
)
from labtwin.simulators.chem.descriptors import DESCRIPTOR_UNITS, descriptors
from labtwin.simulators.chem.molecule import (
    Limits,
    parse_smiles,
    problems,
    stereo_form,
    structural_alerts,
)
from labtwin.simulators.chem.workers import MoleculePool, Outcome
from labtwin.simulators.chem.xtb import XtbError, XtbSettings, gfn2_single_point

if TYPE_CHECKING:
    from labtwin.simulators.chem.reaction_energy import ReactionEnergy

Kind = Literal["descriptors", "xtb"]
KINDS: tuple[str, ...] = ("descriptors", "xtb")
#: units of the conformer and xTB values an ``"xtb"`` measurement adds
THREE_D_UNITS = {
    "mmff_energy_min": "kcal/mol",
    "conformer_strain": "kcal/mol",
    "conformer_spread": "kcal/mol",
    "xtb_energy": "Eh",
    "xtb_gap": "eV",
    "xtb_dipole": "D",
}
UNITS = {**DESCRIPTOR_UNITS, **THREE_D_UNITS}
#: jobs a worker holds queued behind the one it runs, by kind: a descriptor job takes a few
#: milliseconds, a tenth of which is the trip to the worker and back, so a worker with the
#: next job already in its pipe does not sit idle for it; seconds-long xTB jobs queue
#: nothing, so that no job waits behind a long one while another worker is free
PREFETCH = {"descriptors": 1, "xtb": 0}
#: jobs one message to a worker carries, at most, by kind: a descriptor job's trip to its
#: worker and back (pickling, two wake-ups of the caller) costs about a tenth of the job, so
#: several travel together (fewer as the batch goes: guided chunks); xTB jobs go alone
CHUNK = {"descriptors": 8, "xtb": 1}
#: with two or more workers, a batch with at least this many new strings per worker is
#: screened in the workers (parse, canonicalise, check: 0.5 ms a drug-sized SMILES, an
#: eighth of a descriptor measurement, that the caller would otherwise do alone first)
SCREEN_IN_WORKERS = 4
#: strings one screening message to a worker carries, at most (guided: fewer as the batch
#: goes, see :mod:`~labtwin.simulators.chem.workers`)
SCREEN_CHUNK = 16
#: kinds whose batches of new strings are screened and measured in one pass: a worker
#: screens each string of a message and measures what passes, in one round trip
#: (:class:`ScreenAndMeasure`), so that no worker waits for the screening of the whole
#: batch before its first measurement; xTB jobs take seconds, where a screening round
#: costs nothing, and a spelling of a cached molecule should not be measured again
ONE_PASS = frozenset({"descriptors"})
#: a batch goes through the one pass with two or more workers and at least this many new
#: strings per worker; fewer are screened in the caller (a few tenths of a millisecond
#: each), and so is every batch of a one-worker engine, where nothing runs beside the
#: worker (the same wall time either way: 99.0 and 98.9 ms, median of 40 rounds of 32
#: drugs) and screening first keeps a new spelling of a cached molecule from being measured
ONE_PASS_MIN = 4
#: kinds whose jobs the workers pull from a shared queue, one at a time, costliest first
#: (:meth:`~labtwin.simulators.chem.workers.MoleculePool.map` with ``pull``): a descriptor
#: job takes a millisecond or two, and a message per job, or per chunk of jobs, kept a
#: worker waiting for the caller at every chunk's end and left one worker idle while the
#: other finished a chunk it had been sent too early (32 drugs on 2 workers: 28.4 against
#: 29.7 ms a batch, 1.86x against 1.78x a 1-worker engine, medians of 60 batches of the
#: three alternating, in each of three runs). :data:`PREFETCH` and :data:`CHUNK`
#: are what such kinds use where there is no shared queue (no
#: :data:`~labtwin.simulators.chem.workers.PULL`)
PULL_KINDS = frozenset({"descriptors"})
_ONLY_STR = frozenset({str})


@dataclass(frozen=True)
class MoleculeSettings:
    """Everything a result depends on besides the molecule and the kind."""

    conformers: ConformerSettings = ConformerSettings()
    xtb: XtbSettings = XtbSettings()
    limits: Limits = Limits()


class ReadOnlyDict(_ReadOnlyDict):
    """The values and structure of a result the engine returns, which its caches hand out
    again: read-only (read it, or copy it: ``dict(values)``)."""

    __slots__ = ()
    read_only_message = (
        "a molecule result is read-only (the engine's caches hand it out again); "
        "copy it to change it: dict(result.values)"
    )


@dataclass(frozen=True)
class MoleculeResult:
    """One molecule measured: ``status`` ``ok`` / ``invalid`` / ``failed`` with ``reason``.

    ``values`` maps names of :data:`UNITS` to floats (descriptors always; the 3D values
    for kind ``"xtb"``); ``alerts`` lists structural alerts; ``n_atoms`` counts atoms
    with hydrogens; ``structure`` holds the lowest conformer, the geometry xTB measured
    (kind ``"xtb"``), as :mod:`labtwin.structures` artifacts (empty otherwise).
    A result from :meth:`MoleculeEngine.measure` is read-only throughout (``values`` and
    ``structure`` are :class:`ReadOnlyDict`, the arrays not writeable): a cache hit hands
    out the stored result itself.
    """

    status: Literal["ok", "invalid", "failed"]
    smiles: str = ""
    canonical: str = ""
    kind: str = ""
    values: dict[str, float] = field(default_factory=ReadOnlyDict)
    alerts: tuple[str, ...] = ()
    n_atoms: int = 0
    reason: str = ""
    notes: tuple[str, ...] = ()
    structure: dict[str, np.ndarray] = field(default_factory=ReadOnlyDict, compare=False)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class Screened(NamedTuple):
    """An acceptable molecule as screening left it: its canonical SMILES and its atoms
    with hydrogens (the job's estimated cost, for largest-first dispatch)."""

    canonical: str
    n_atoms: int


@dataclass(frozen=True)
class Job:
    """What a worker gets: one canonical SMILES, the kind and the settings."""

    canonical: str
    kind: str
    settings: MoleculeSettings


def measure_job(job: Job) -> MoleculeResult:
    """Measure one molecule (in a worker). Expected chemistry failures (no conformer, no
    MMFF94 parameters, SCF not converged) are ``failed`` results; anything else raises."""
    from rdkit import Chem
    from rdkit.Chem import rdMolDescriptors

    mol = Chem.MolFromSmiles(job.canonical)
    if mol is None:  # a canonical SMILES of RDKit's own always reads back
        raise RuntimeError(f"canonical SMILES {job.canonical!r} did not parse")
    values = descriptors(mol)
    alerts = tuple(structural_alerts(mol))
    n_atoms = rdMolDescriptors.CalcNumAtoms(mol)  # with hydrogens (AddHs' count, 60x faster)
    base = dict(canonical=job.canonical, kind=job.kind, alerts=alerts, n_atoms=n_atoms)
    if job.kind == "descriptors":
        return MoleculeResult("ok", values=values, **base)
    notes: list[str] = []
    form = stereo_form(job.canonical)
    if form.assigned:
        notes.append(
            f"stereochemistry left unassigned: measured as {form.assigned[:120]} "
            "(RDKit's first enumerated stereoisomer)"
        )
    embedded = mol if form.embedded == job.canonical else Chem.MolFromSmiles(form.embedded)
    try:
        ensemble = conformer_ensemble(embedded, job.settings.conformers)
    except ConformerError as err:
        return MoleculeResult("failed", reason=f"conformers: {err}", **base)
    if not ensemble.converged.all():
        notes.append(
            f"MMFF94 minimisation of {int((~ensemble.converged).sum())} of "
            f"{len(ensemble.converged)} conformers stopped at "
            f"{job.settings.conformers.mmff_max_iters} iterations"
        )
    values |= ensemble.summary()
    try:
        values |= gfn2_single_point(
            ensemble.atomic_numbers, ensemble.positions_angstrom, job.settings.xtb
        )
    except XtbError as err:
        return MoleculeResult("failed", reason=f"GFN2-xTB: {err}", **base)
    shown = ensemble.reflected() if form.mirrored else ensemble  # values: the same either way
    return MoleculeResult(
        "ok", values=values, notes=tuple(notes), structure=shown.structure(), **base
    )


@dataclass(frozen=True)
class ScreenAndMeasure:
    """What a worker runs per input in the one pass (:data:`ONE_PASS`): a new SMILES string
    is screened with ``screen_function`` (:func:`screen_chunk`, as when the workers screen
    alone) and, if it passes, measured with ``job_function`` from its canonical SMILES
    (:func:`measure_job`: the very job of the two-round path, so the result is the same
    bit for bit); a :class:`Screened` molecule (screened before) is measured alone.

    Returns ``(screening, result)``: the string's :class:`Screened` or ``invalid``
    result and the measurement (``None`` for an invalid string), or ``(None, result)``
    for a :class:`Screened` input. Pickled once per message, by reference to its two
    functions."""

    job_function: Any
    screen_function: Any
    kind: str
    settings: MoleculeSettings

    def __call__(
        self, item: str | Screened
    ) -> tuple[Screened | MoleculeResult | None, MoleculeResult | None]:
        if type(item) is Screened:
            return None, self.job_function(Job(item.canonical, self.kind, self.settings))
        (screened,) = self.screen_function(([item], self.settings.limits))
        if not isinstance(screened, Screened):
            return screened, None
        return screened, self.job_function(Job(screened.canonical, self.kind, self.settings))


def warm_up() -> None:
    """Import RDKit and tblite and load the SA-score table (a worker's start-up, so that a
    molecule's timeout measures the molecule)."""
    from rdkit.Chem import QED, AllChem, rdDistGeom  # noqa: F401
    from tblite.interface import Calculator  # noqa: F401

    from labtwin.simulators.chem.descriptors import sascorer

    if sascorer()._fscores is None:  # a worker forked from the forkserver has it already
        sascorer().readFragmentScores()


class MoleculeEngine:
    """Measures batches of SMILES (see the module docs).

    ``timeouts_s`` maps a kind to the seconds one molecule may take in its worker;
    ``job_function`` is what a worker runs per molecule (:func:`measure_job`; a test may
    pass one that crashes on purpose); ``screen_function`` is what a worker runs per chunk
    of SMILES when screening moves to the workers, or per string in the one pass
    (:func:`screen_chunk`; likewise);
    ``cache_size`` bounds the result cache, the answers of each kind, and four times it the
    screening memo (least recently used entries are dropped first).
    """

    def __init__(
        self,
        settings: MoleculeSettings = MoleculeSettings(),
        n_workers: int = 1,
        timeouts_s: dict[str, float] | None = None,
        job_function: Any = measure_job,
        cache_size: int = 4096,
        screen_function: Any = None,
    ) -> None:
        self.settings = settings
        self.timeouts_s = {"descriptors": 30.0, "xtb": 120.0, **(timeouts_s or {})}
        self.job_function = job_function
        self.screen_function = screen_function or screen_chunk
        self.pool = MoleculePool(n_workers, initializer=warm_up)
        self.cache_size = int(cache_size)
        self._cache: OrderedDict[tuple, MoleculeResult] = OrderedDict()
        #: SMILES as written -> its screening (valid for ``_memo_limits``)
        self._memo: OrderedDict[str, Screened | MoleculeResult] = OrderedDict()
        self._memo_limits = settings.limits
        #: kind -> SMILES as written -> the result :meth:`measure` returned for it (valid
        #: for the settings object ``_hits_settings``): a repeated string's whole answer
        self._hits: dict[str, OrderedDict[str, MoleculeResult]] = {}
        self._hits_settings = settings
        self._token_of: tuple[MoleculeSettings, str] | None = None  # see _settings_token
        self._lock = threading.Lock()
        #: molecules measured in workers (not served from the cache); for tests and logs
        self.computed = 0
        #: inputs screened with RDKit (not served from the screening memo); likewise
        self.screened = 0

    def cache_key(self, canonical: str, kind: str) -> tuple:
        """The result cache's key: canonical SMILES, kind and every setting."""
        return (canonical, kind, self._settings_token())

    def _settings_token(self) -> str:
        """``repr(self.settings)``, made once per settings object: settings of plain
        values with equal reprs are equal, and a string keeps its hash, so a key's hash does
        not walk the nested dataclasses on every hit (a third of a hit's cost)."""
        settings = self.settings
        if self._token_of is None or self._token_of[0] is not settings:
            self._token_of = (settings, repr(settings))
        return self._token_of[1]

    def screen(self, smiles: str) -> MoleculeResult | str:
        """The canonical SMILES of an acceptable molecule, or its ``invalid`` result
        (computed afresh; :meth:`measure` goes through the screening memo)."""
        screened = self._screen(smiles)
        return screened.canonical if isinstance(screened, Screened) else screened

    def _screen(self, smiles: Any) -> Screened | MoleculeResult:
        return screen_one(smiles, self.settings.limits)

    def _screen_in_workers(self, smiles: list[Any]) -> dict[str, Screened | MoleculeResult]:
        """Screen the strings the memo has not seen in the workers, several to a message
        (up to :data:`SCREEN_CHUNK`, longest string first), when there are enough of them
        to share out (:data:`SCREEN_IN_WORKERS`); else nothing (the caller screens them
        itself). Screenings go into the memo; an input whose worker was lost is ``failed``
        with the reason (a native crash in RDKit ends a worker, not the caller; the pool
        screens the rest of a lost message again, one string a message)."""
        n = self.pool.n_workers
        if n < 2 or len(smiles) < SCREEN_IN_WORKERS * n:  # not enough to share out
            return {}
        memo = self._memo
        new = list(dict.fromkeys(s for s in smiles if type(s) is str and s not in memo))
        if len(new) < SCREEN_IN_WORKERS * n:
            return {}
        limits, timeout_s = self.settings.limits, self.timeouts_s["descriptors"]
        outcomes = self.pool.map(
            self.screen_function,
            [([s], limits) for s in new],
            timeout_s,
            costs=[len(s) for s in new],
            prefetch=1,
            chunk=SCREEN_CHUNK,
            pull=True,
        )
        found: dict[str, Screened | MoleculeResult] = {}
        for s, outcome in zip(new, outcomes):
            if outcome.ok:
                found[s] = memo[s] = outcome.value[0]
            else:
                found[s] = MoleculeResult("failed", smiles=_short(s), reason=outcome.failed)
        self.screened += len(found)
        while len(memo) > 4 * self.cache_size:
            memo.popitem(last=False)
        return found

    def _screen_memo(self, smiles: Any) -> Screened | MoleculeResult:
        """:meth:`_screen` through the memo (exact strings only: ``1`` and ``True`` hash
        alike, and a ``str`` subclass may compare differently)."""
        if type(smiles) is not str:
            self.screened += 1
            return self._screen(smiles)
        memo = self._memo
        screened = memo.get(smiles)
        if screened is None:
            self.screened += 1
            screened = memo[smiles] = self._screen(smiles)
            if len(memo) > 4 * self.cache_size:
                memo.popitem(last=False)
        else:
            memo.move_to_end(smiles)
        return screened

    def measure(self, smiles: list[str], kind: str) -> list[MoleculeResult]:
        """One result per SMILES, in order; never raises for bad molecules. Results are
        read-only (see :class:`MoleculeResult`)."""
        if kind not in KINDS:
            raise ValueError(f"unknown measurement kind {kind!r}; one of {KINDS}")
        with self._lock:
            hits = self._hits_of(kind)
            # every string seen before: the stored answers themselves, in a few C loops
            if {*map(type, smiles)} <= _ONLY_STR:  # exact strings (see _screen_memo)
                try:
                    found = list(map(hits.__getitem__, smiles))
                except KeyError:
                    pass
                else:
                    deque(map(hits.move_to_end, smiles), maxlen=0)  # least recently used
                    return found
            results = self._measure(smiles, kind)
            for i, (result, s) in enumerate(zip(results, smiles)):
                result = results[i] = _for_input(result, s)
                if type(s) is str and result.status != "failed":
                    results[i] = hits.setdefault(s, result)  # one answer to a repeated string
                    hits.move_to_end(s)
            while len(hits) > self.cache_size:
                hits.popitem(last=False)
            return results

    def _hits_of(self, kind: str) -> OrderedDict[str, MoleculeResult]:
        """The answers to strings seen before for ``kind``, emptied if ``settings`` has been
        replaced since they were stored."""
        if self._hits_settings is not self.settings:
            self._hits.clear()
            self._hits_settings = self.settings
        hits = self._hits.get(kind)
        if hits is None:
            hits = self._hits[kind] = OrderedDict()
        return hits

    def _measure(self, smiles: list[Any], kind: str) -> list[MoleculeResult]:
        """:meth:`measure` for a batch with a new string: screen (through the memo), look
        up the result cache, measure the rest in the workers; for a kind of
        :data:`ONE_PASS` with enough new strings, the workers screen and measure them in
        one pass (:meth:`_one_pass_strings`)."""
        results: list[MoleculeResult | None] = [None] * len(smiles)
        todo: dict[tuple, list[int]] = {}
        screenings: list[Screened] = []  # of each job, in the order of todo
        if self._memo_limits != self.settings.limits:  # settings replaced since
            self._memo.clear()
            self._memo_limits = self.settings.limits
        fresh = self._one_pass_strings(smiles, kind)  # new string -> its inputs' indices
        found = {} if fresh else self._screen_in_workers(smiles)
        screen = (
            (lambda s: found[s] if type(s) is str and s in found else self._screen_memo(s))
            if found
            else self._screen_memo
        )
        for i, s in enumerate(smiles):
            if fresh and type(s) is str and s in fresh:
                fresh[s].append(i)
                continue
            screened = screen(s)
            if isinstance(screened, MoleculeResult):
                results[i] = screened
                continue
            key = self.cache_key(screened.canonical, kind)
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
                results[i] = cached
            elif key in todo:
                todo[key].append(i)
            else:
                todo[key] = [i]
                screenings.append(screened)
        if fresh:
            self._measure_one_pass(fresh, todo, screenings, kind, results)
            return results  # type: ignore[return-value]
        keys = list(todo)
        jobs = [Job(key[0], kind, self.settings) for key in keys]
        outcomes = (
            self.pool.map(
                self.job_function,
                jobs,
                self.timeouts_s[kind],
                costs=[screened.n_atoms for screened in screenings],
                prefetch=PREFETCH.get(kind, 0),
                chunk=CHUNK.get(kind, 1),
                pull=kind in PULL_KINDS,
            )
            if jobs
            else []
        )
        self.computed += len(jobs)
        for key, outcome in zip(keys, outcomes):
            result = self._result_of(key, outcome, kind)
            for i in todo[key]:
                results[i] = result
        return results  # type: ignore[return-value]

    def _one_pass_strings(self, smiles: list[Any], kind: str) -> dict[str, list[int]]:
        """The strings of the batch the screening memo has not seen, each with an empty
        list for its inputs' indices, when ``kind`` is of :data:`ONE_PASS`, there are two
        or more workers and at least :data:`ONE_PASS_MIN` new strings per worker; else
        nothing (the caller screens the batch, or :meth:`_screen_in_workers` does)."""
        n = self.pool.n_workers
        if kind not in ONE_PASS or n < 2 or len(smiles) < ONE_PASS_MIN * n:
            return {}
        memo = self._memo
        fresh = {s: [] for s in smiles if type(s) is str and s not in memo}
        return fresh if len(fresh) >= ONE_PASS_MIN * n else {}

    def _measure_one_pass(
        self,
        fresh: dict[str, list[int]],
        todo: dict[tuple, list[int]],
        screenings: list[Screened],
        kind: str,
        results: list[MoleculeResult | None],
    ) -> None:
        """Screen and measure the ``fresh`` strings, and measure the ``todo`` molecules
        (screened before, not cached), in one :meth:`MoleculePool.map` of
        :class:`ScreenAndMeasure`, filling ``results`` at their indices.

        A new string screens into the memo as it would in the caller. Its worker measures
        what passes without knowing the cache: a spelling of a molecule already cached, or
        of one another string of the batch measured too, is measured again (a few
        milliseconds in a worker, rather than the batch's screening in the caller or a
        second round of messages), and the result cached first is the answer to both (the
        two are equal: a job is a function of the canonical SMILES alone). A string whose
        worker was lost is ``failed`` with the reason and stays out of the memo. A string's
        timeout (the kind's) covers its screening and its measurement together."""
        strings, keys = list(fresh), list(todo)
        items: list[str | Screened] = [*strings, *screenings]
        # a string's cost: its characters (its atoms are not known yet), about its atoms
        costs = [len(s) for s in strings] + [screened.n_atoms for screened in screenings]
        outcomes = self.pool.map(
            ScreenAndMeasure(self.job_function, self.screen_function, kind, self.settings),
            items,
            self.timeouts_s[kind],
            costs=costs,
            prefetch=PREFETCH.get(kind, 0),
            chunk=CHUNK.get(kind, 1),
            pull=kind in PULL_KINDS,
        )
        memo = self._memo
        for s, outcome in zip(strings, outcomes):
            if not outcome.ok:
                result = MoleculeResult(
                    "failed", smiles=_short(s), kind=kind, reason=outcome.failed
                )
            else:
                screened, measured = outcome.value
                memo[s] = screened
                self.screened += 1
                if measured is None:  # invalid: the screening's result
                    result = screened
                else:
                    self.computed += 1
                    key = self.cache_key(screened.canonical, kind)
                    result = self._result_of(key, Outcome(measured), kind)
            for i in fresh[s]:
                results[i] = result
        self.computed += len(keys)
        for key, outcome in zip(keys, outcomes[len(strings) :]):
            if outcome.ok:
                outcome = Outcome(outcome.value[1])
            result = self._result_of(key, outcome, kind)
            for i in todo[key]:
                results[i] = result
        while len(memo) > 4 * self.cache_size:
            memo.popitem(last=False)

    def _result_of(self, key: tuple, outcome: Outcome, kind: str) -> MoleculeResult:
        """A job's result from its outcome: read-only and cached where ``ok``, ``failed``
        with the reason where its worker was lost. Where ``key`` is cached already (in the
        one pass: another spelling's result, from before or from this batch, equal to this
        one), the cached result."""
        if not outcome.ok:
            return MoleculeResult("failed", canonical=key[0], kind=kind, reason=outcome.failed)
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            return cached
        result = _frozen(outcome.value)
        if result.ok:
            self._store(key, result)
        return result

    def reaction_energy(self, reagents: list[str], products: list[str]) -> ReactionEnergy:
        """GFN2-xTB energy of ``reagents -> products``, products minus reagents, each molecule
        measured as an ``"xtb"`` experiment (its lowest MMFF94 conformer, through this
        engine's workers and cache); unbalanced or unreadable sides are ``invalid``
        (:mod:`~labtwin.simulators.chem.reaction_energy`)."""
        from labtwin.simulators.chem.reaction_energy import reaction_energy

        return reaction_energy(self, reagents, products)

    def clear_cache(self) -> None:
        """Forget every result, answer and screening (the next call starts cold)."""
        with self._lock:
            self._cache.clear()
            self._memo.clear()
            self._hits.clear()

    def close(self) -> None:
        self.pool.close()

    def _store(self, key: tuple, result: MoleculeResult) -> None:
        self._cache[key] = result
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)


def screen_one(smiles: Any, limits: Any) -> Screened | MoleculeResult:
    """An input's screening: parse, canonicalise and check it against ``limits``."""
    parsed = parse_smiles(smiles, limits)
    if not parsed.ok:
        return MoleculeResult("invalid", smiles=_short(smiles), reason=parsed.reason)
    found = problems(parsed.mol, limits)
    if found:
        return MoleculeResult(
            "invalid",
            smiles=_short(smiles),
            canonical=parsed.canonical,
            reason=f"{parsed.canonical[:80]}: " + "; ".join(found),
        )
    from rdkit.Chem import rdMolDescriptors

    return Screened(parsed.canonical, rdMolDescriptors.CalcNumAtoms(parsed.mol))


def screen_chunk(job: tuple[list[str], Any]) -> list[Screened | MoleculeResult]:
    """Screen a list of SMILES (in a worker; the engine sends one a job and the pool several
    jobs a message); see :meth:`MoleculeEngine._screen_in_workers`."""
    smiles, limits = job
    return [screen_one(s, limits) for s in smiles]


def _short(smiles: Any, limit: int = 200) -> str:
    text = smiles if isinstance(smiles, str) else repr(smiles)
    return text if len(text) <= limit else text[:limit] + "..."


def _for_input(result: MoleculeResult, smiles: Any) -> MoleculeResult:
    """``result`` for the input as written: itself where its ``smiles`` is that input
    already, else a shallow copy with that ``smiles`` (``values`` and ``structure`` are
    read-only, so the copy shares them). Fields go straight into the new instance's
    ``__dict__`` (what :func:`dataclasses.replace` does through ``__init__``, at a third
    of its cost)."""
    short = _short(smiles)
    if result.smiles == short:
        return result
    copy = object.__new__(MoleculeResult)
    fields = copy.__dict__
    fields.update(result.__dict__)
    fields["smiles"] = short
    return copy


def _frozen(result: MoleculeResult) -> MoleculeResult:
    """``result`` (fresh from a worker: the caller's own copy) made read-only in place:
    ``values`` and ``structure`` as :class:`ReadOnlyDict`, the arrays not writeable."""
    fields = result.__dict__
    fields["values"] = ReadOnlyDict(result.values)
    for array in result.structure.values():
        array.flags.writeable = False
    fields["structure"] = ReadOnlyDict(result.structure)
    return result
