"""The campaign engine: the one place where campaigns start, advance and end.

:class:`CampaignBatch` holds a fixed number of *slots*, each running one
:class:`Campaign` at a time. ``reset(slots, seeds)`` starts campaigns;
``step(slots, proposals)`` advances them by one proposal each, sending every
experiment of the step to the lab's simulator in **one** batched call, and
returns one :class:`Record` per proposal. Every view is a thin adapter over it:
:class:`~labtwin.env.LabEnv` (a batch of one), :class:`~labtwin.vector.VectorLabEnv`,
the Stable-Baselines3 adapter, :class:`~labtwin.tools.ChatLabEnv`, the TRL reward
function, the baseline runner and the GRPO rollout engine.

A proposal is an experiment (a model, a dict, JSON text, or a vector of the
lab's numeric view), an :class:`~labtwin.experiment.Answer`, an
:class:`~labtwin.experiment.Analysis` call, or an
:class:`~labtwin.experiment.Invalid` (a reply that said nothing usable).

Seeding, in one place (:func:`campaign_rng`): a campaign has an integer seed
``s``; its generator is ``numpy.random.default_rng(s)``; it draws the
campaign's conditions first, then one seed per budgeted step (experiments,
answers, invalid calls; analysis calls draw none), and, when a lab confirms, one
last seed for the closing confirmation. A slot reset without a seed
draws the campaign seed from the slot's own stream, which is seeded by the
slot's last explicit seed. So the same seed gives the same campaign in every
view, however campaigns are batched, and any campaign replays from its seed
and its proposals (:func:`replay`).

An observer (``recorder``, e.g. :class:`~labtwin.runs.RunStore`) is told of
every campaign start (with its conditions) and every record; it never steers.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import gymnasium as gym
import numpy as np

from labtwin.experiment import Analysis, Answer, Invalid, validate_many
from labtwin.frames import campaign_points, lab_frame
from labtwin.gcpause import lab_code, paused_gc
from labtwin.measurement import Measurement, to_jsonable
from labtwin.seeding import campaign_generators, integer_below
from labtwin.task import Task

RewardMode = Literal["improvement", "score"]
REWARD_MODES: tuple[str, ...] = ("improvement", "score")
RecordKind = Literal["experiment", "answer", "analysis", "invalid"]
_SEED_LIMIT = 2**63 - 1
_SLOT_STREAM = 0x5EED  # entropy word that separates a slot's stream from its campaign's


@dataclass(eq=False, slots=True)
class Record:
    """One step of a campaign: the currency of every view, logger and trainer.

    ``kind`` is ``experiment`` (a proposed experiment, valid or not),
    ``answer`` (a submitted final answer), ``analysis`` (an analysis tool
    call; ``note`` holds its result, ``score`` is None) or ``invalid`` (a
    reply that was neither: no parsable call, an unknown tool).
    ``proposal`` is what was proposed, in JSON types, enough to replay it.
    """

    campaign: int
    step: int
    kind: RecordKind
    measurement: Measurement
    score: float | None
    reward: float
    proposal: Any = None
    note: str = ""
    vector: np.ndarray | None = None
    #: on the step that ended a campaign of a lab that confirms (:attr:`Task.confirms_best`):
    #: a fresh measurement of the campaign's recommended experiment and its score alone
    confirmation: Measurement | None = None
    confirmed_score: float | None = None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Record):
            return NotImplemented
        same_vector = (self.vector is None and other.vector is None) or (
            self.vector is not None
            and other.vector is not None
            and np.array_equal(self.vector, other.vector)
        )
        return (
            same_vector
            and self.to_dict() == other.to_dict()
            and (self.measurement == other.measurement)
            and self.confirmation == other.confirmation
            and self.confirmed_score == other.confirmed_score
        )

    @property
    def budgeted(self) -> bool:
        """Whether the step spent an experiment of the budget."""
        return self.kind != "analysis"

    def to_dict(self, artifacts: bool = True) -> dict[str, Any]:
        """JSON-ready dict; ``artifacts=False`` leaves out the artifact listing, so that
        a record read back from a run compares equal to the one that was written."""
        measurement = self.measurement.to_dict()
        if not artifacts:
            measurement.pop("artifacts")
        out = {
            "campaign": self.campaign,
            "step": self.step,
            "kind": self.kind,
            "score": self.score,
            "reward": self.reward,
            "proposal": to_jsonable(self.proposal),
            "note": self.note,
            "measurement": measurement,
        }
        if self.confirmation is not None:  # only on a confirmed campaign's last step
            confirmation = self.confirmation.to_dict()
            if not artifacts:
                confirmation.pop("artifacts")
            out["confirmation"] = confirmation
            out["confirmed_score"] = self.confirmed_score
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Record:
        return cls(
            campaign=int(data["campaign"]),
            step=int(data["step"]),
            kind=data["kind"],
            measurement=Measurement.from_dict(data["measurement"]),
            score=data["score"],
            reward=float(data["reward"]),
            proposal=data.get("proposal"),
            note=data.get("note", ""),
            confirmation=(
                Measurement.from_dict(data["confirmation"]) if "confirmation" in data else None
            ),
            confirmed_score=data.get("confirmed_score"),
        )

    def replay_proposal(self) -> Any:
        """The proposal as the engine takes it, rebuilt from the record."""
        if self.kind == "answer":
            return Answer(self.proposal)
        if self.kind == "analysis":
            return Analysis(self.proposal["name"], self.proposal["arguments"])
        if self.kind == "invalid":
            return Invalid(self.measurement.reason, self.proposal)
        return self.proposal


@dataclass
class Campaign:
    """One episode: up to ``task.budget`` experiments and ``max_turns`` turns, or an answer."""

    task: Task
    id: int
    seed: int
    rng: np.random.Generator
    conditions: dict[str, Any]
    max_turns: int
    reward_mode: RewardMode = "improvement"
    invalid_penalty: float = 0.0
    history: list[Record] = field(default_factory=list)
    best_score: float = 0.0
    done: bool = False
    end_reason: str = ""
    # budgeted records among the first _counted of history (history is append-only)
    _counted: int = field(default=0, init=False, repr=False, compare=False)
    _budgeted: int = field(default=0, init=False, repr=False, compare=False)
    # ok experiment measurements among the first _indexed records, by experiment
    _indexed: int = field(default=0, init=False, repr=False, compare=False)
    _index: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    _unindexed: bool = field(default=False, init=False, repr=False, compare=False)
    _asked: tuple = field(default=(None, None), init=False, repr=False, compare=False)
    # the recommended record (recommended()) of the first _ranked records
    _ranked: int = field(default=0, init=False, repr=False, compare=False)
    _best: Record | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def experiments(self) -> int:
        """Budgeted steps so far (experiments, answers, invalid calls)."""
        history = self.history
        if len(history) == self._counted:  # kept current by CampaignBatch._append
            return self._budgeted
        if len(history) < self._counted:  # history was replaced: count again
            self._counted = self._budgeted = 0
        if len(history) > self._counted:
            self._budgeted += sum(r.budgeted for r in history[self._counted :])
            self._counted = len(history)
        return self._budgeted

    @property
    def remaining(self) -> int:
        return self.task.budget - self.experiments

    @property
    def cost_left(self) -> float | None:
        """What is left of the task's cost budget (None: the task has none); negative
        when the last experiment overdrew it."""
        cost_budget = self.task.cost_budget
        return None if cost_budget is None else cost_budget - self.cost

    @property
    def turns_left(self) -> int:
        return self.max_turns - len(self.history)

    @property
    def cost(self) -> float:
        return float(sum(r.measurement.cost for r in self.history))

    @property
    def confirmed_score(self) -> float | None:
        """The score of the closing confirmation (None before the end, or where the lab does
        not confirm or the campaign measured nothing)."""
        last = self.history[-1] if self.done and self.history else None
        return last.confirmed_score if last is not None else None

    @property
    def result_score(self) -> float:
        """What the campaign earned: its best score, or the lower of it and the confirmation's
        where there is one (the sum of its improvement rewards above the baseline)."""
        confirmed = self.confirmed_score
        return self.best_score if confirmed is None else min(self.best_score, confirmed)

    def repeats_of(self, experiment: dict[str, Any] | None) -> list[Measurement]:
        """The ``ok`` experiment measurements so far of an equal experiment, in order (what
        :func:`score_of` pools), from an index kept up to date as the history grows.

        The index maps an experiment's hash to its measurement (a list once there are more
        of one hash), so it keeps no object per record for the collector to walk; a lookup
        keeps those whose experiment compares equal, as :func:`score_of` compares them.
        :meth:`CampaignBatch._append` indexes the record of the experiment asked about
        last as it appends it; records added any other way are indexed here."""
        if len(self.history) != self._indexed:
            self._index_history()
        try:
            key = hash(frozenset(experiment.items()))  # type: ignore[union-attr]
        except (AttributeError, TypeError):
            key = None
        self._asked = (experiment, key)
        if key is None or self._unindexed:
            return [m for m in self.measurements() if m.ok and m.experiment == experiment]
        found = self._index.get(key)
        if found is None:
            return []
        if type(found) is list:
            return [m for m in found if m.experiment == experiment]
        return [found] if found.experiment == experiment else []

    def _index_history(self) -> None:
        """Index the records appended since the index was last current (all of them where
        the history was replaced)."""
        history = self.history
        if len(history) < self._indexed:  # history was replaced: index it again
            self._indexed, self._index, self._unindexed = 0, {}, False
        asked, asked_key = self._asked
        for record in history[self._indexed :]:
            m = record.measurement
            if record.kind == "experiment" and m.status == "ok":
                # the experiment is mostly the one asked about last (its key is known)
                key = asked_key if m.experiment is asked else _experiment_key(m.experiment)
                if key is None:
                    self._unindexed = True
                else:
                    self._add_to_index(key, m)
        self._indexed = len(history)

    def _add_to_index(self, key: int, m: Measurement) -> None:
        found = self._index.get(key)
        if found is None:
            self._index[key] = m
        elif type(found) is list:
            found.append(m)
        else:
            self._index[key] = [found, m]

    def recommended(self) -> Record | None:
        """:func:`recommended` of the history, kept as records are appended
        (:meth:`CampaignBatch._append`) and worked out again where the history was replaced
        or grew some other way."""
        if self._ranked != len(self.history):
            self._best, self._ranked = recommended(self.history), len(self.history)
        return self._best

    def measurements(self) -> list[Measurement]:
        """Measurements of the campaign's experiments, in order (what analysis tools see)."""
        return [r.measurement for r in self.history if r.kind == "experiment"]

    def next_seed(self) -> int:
        """``int(self.rng.integers(0, 2**63 - 1))``, the same draw (:func:`integer_below`)."""
        return integer_below(self.rng, _SEED_LIMIT)


def _experiment_key(experiment: Any) -> int | None:
    """A hash equal for equal experiment dicts (None where a value is unhashable)."""
    try:
        return hash(frozenset(experiment.items()))
    except (AttributeError, TypeError):
        return None


class Recorder(Protocol):
    """What the engine tells an observer (the run store is one)."""

    def campaign_started(self, campaign: Campaign) -> None: ...

    def record(self, record: Record) -> None: ...


def campaign_rng(seed: int) -> np.random.Generator:
    """The generator of the campaign seeded ``seed`` (the one seeding rule; a batch of
    campaigns gets the same generators from :func:`labtwin.seeding.campaign_generators`)."""
    return np.random.default_rng(seed)


def derive_seeds(seed: int, n: int, *keys: int) -> list[int]:
    """``n`` independent campaign seeds derived from ``seed`` and integer ``keys``.

    The entropy ends with the number of keys plus one: ``SeedSequence`` reads
    trailing zero words as absent, so without it ``keys=(0,)`` and ``keys=()``
    would give the same seeds.
    """
    entropy = [check_seed(seed), *(check_seed(k) for k in keys), len(keys) + 1]
    children = np.random.SeedSequence(entropy).spawn(n)
    return [int(c.generate_state(1, np.uint64)[0] >> np.uint64(1)) for c in children]


def check_seed(seed: Any) -> int:
    """A campaign seed must be a non-negative integer (as in Gymnasium)."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"a seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def score_of(
    task: Task,
    kind: RecordKind,
    measurement: Measurement,
    conditions: dict[str, Any],
    history: list[Measurement],
    repeats: list[Measurement] | None = None,
) -> float | None:
    """The score of one step, from the measurement and the campaign's conditions.

    The engine scores with it and :meth:`labtwin.runs.Run.rescore` re-scores
    with it, so a recorded score is always reproducible offline. ``history``
    is the campaign's experiment measurements before the step (answers use it).

    A repeat of an experiment the campaign already measured is scored from all
    its measurements pooled (:meth:`labtwin.task.Task.pool`), so repeating
    the best experiment cannot harvest instrument noise: its score tends to
    the true value, not to the maximum of the noise. ``repeats`` (those of ``history``) may be given when known.
    """
    if kind == "analysis":
        return None
    if kind == "experiment" and measurement.ok and task.pool_repeats:
        if repeats is None:
            repeats = [m for m in history if m.ok and m.experiment == measurement.experiment]
        return task.score(task.pool([*repeats, measurement]), conditions)
    if kind != "answer" or not measurement.ok:
        return task.score(measurement, conditions)
    answer = task.parse_answer(measurement.experiment)
    if isinstance(answer, Invalid):  # a recorded answer that no longer validates
        return float(task.invalid_score)
    return task.clip_score(float(task.score_answer(answer, conditions, history)))


def recommended(records: Sequence[Record]) -> Record | None:
    """The experiment a campaign recommends: its best-scoring ``ok`` experiment (the first
    of equals), or None if it measured nothing."""
    best = None
    for r in records:
        if r.kind == "experiment" and r.measurement.ok and r.score is not None:
            if best is None or r.score > best.score:
                best = r
    return best


class CampaignBatch:
    """Slots of campaigns of one lab, advanced together.

    Rewards: ``"improvement"`` pays how much a score raised the campaign's best
    so far (a campaign's return is then its best score above the lab's
    baseline); ``"score"`` pays each score. ``invalid_penalty`` is subtracted
    for every step whose measurement is ``invalid``. An accepted answer pays
    its score and ends the campaign. A campaign ends when its budget is spent,
    an answer is accepted, or ``max_turns`` turns were taken.

    Confirmation: when a campaign of a lab that confirms (:attr:`Task.confirms_best`) ends
    without an answer, the lab measures its recommended experiment (:func:`recommended`)
    once more with a fresh seed from the campaign's generator, in one batched call for all
    campaigns ending in the step. The fresh measurement is scored alone (never pooled with
    the readings it was chosen from), so its score carries no selection bias. It is kept on
    the last step's record (``confirmation``, ``confirmed_score``), costs no budget, and in
    ``"improvement"`` mode takes back what noise gave: the last step's reward drops by
    ``max(best - confirmed, 0)``, so a campaign's return is ``min(best, confirmed)`` above the
    baseline. Picking the luckiest of many noisy readings (repeats, near-repeats, equivalent
    experiments) then earns nothing: the confirmation reads the true value afresh. In
    ``"score"`` mode each step pays its own score, whose noise averages out, and the
    confirmation is recorded without changing rewards.
    """

    def __init__(
        self,
        task: Task,
        num_slots: int,
        reward_mode: RewardMode = "improvement",
        invalid_penalty: float = 0.0,
        max_turns: int | None = None,
        recorder: Recorder | None = None,
        first_campaign_id: int = 0,
    ) -> None:
        if num_slots < 1:
            raise ValueError(f"num_slots must be at least 1, got {num_slots}")
        if reward_mode not in REWARD_MODES:
            raise ValueError(f"reward_mode must be one of {REWARD_MODES}, got {reward_mode!r}")
        if not math.isfinite(invalid_penalty) or invalid_penalty < 0:
            raise ValueError(f"invalid_penalty must be >= 0, got {invalid_penalty!r}")
        self.task = task
        self.num_slots = int(num_slots)
        self.reward_mode = reward_mode
        self.invalid_penalty = float(invalid_penalty)
        self.max_turns = int(max_turns) if max_turns is not None else task.max_turns
        if self.max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {max_turns}")
        self.recorder = recorder
        self.next_campaign_id = int(first_campaign_id)
        self.campaigns: list[Campaign | None] = [None] * self.num_slots
        self._streams: list[np.random.Generator | None] = [None] * self.num_slots
        self._analysis = {tool.name: tool for tool in task.analysis_tools()}
        # the numeric observation of every slot, brought up to date row by row (_show)
        self._obs = np.zeros(
            (self.num_slots, task.budget + 1, observation_width(task)), dtype=np.float32
        )
        self._shown: list[_Shown] = [_Shown() for _ in range(self.num_slots)]

    # ---- starting campaigns ---------------------------------------------------------

    def reset(
        self,
        slots: Sequence[int] | None = None,
        seeds: Sequence[int | None] | None = None,
        conditions: Sequence[dict[str, Any]] | None = None,
    ) -> list[Campaign]:
        """Start a new campaign in each slot (all slots by default).

        ``seeds[i]`` seeds slot ``slots[i]``'s campaign; None draws it from the
        slot's stream. ``conditions`` replace the sampled ones (a fixed lab,
        e.g. the nominal conditions); the generator still draws them first so
        that experiment seeds do not depend on whether conditions were given.
        """
        slots = list(range(self.num_slots)) if slots is None else list(slots)
        seeds = [None] * len(slots) if seeds is None else list(seeds)
        if len(seeds) != len(slots):
            raise ValueError(f"expected {len(slots)} seeds, got {len(seeds)}")
        if conditions is not None and len(conditions) != len(slots):
            raise ValueError(f"expected {len(slots)} conditions, got {len(conditions)}")
        campaign_seeds = []
        for slot, seed in zip(slots, seeds):
            if seed is not None:
                seed = check_seed(seed)
                self._streams[slot] = np.random.default_rng([_SLOT_STREAM, seed])
            elif self._streams[slot] is None:
                self._streams[slot] = np.random.default_rng()
            if seed is None:
                seed = integer_below(self._streams[slot], _SEED_LIMIT)
            campaign_seeds.append(seed)
        # campaign_rng of each seed, made together (a vector env resets many at a time)
        rngs = campaign_generators(campaign_seeds)
        with lab_code():
            sampled = self.task.sample_conditions_batch(rngs)
        started = []
        for k, (slot, seed, rng) in enumerate(zip(slots, campaign_seeds, rngs)):
            campaign = Campaign(
                self.task,
                self.next_campaign_id,
                seed,
                rng,
                dict(conditions[k]) if conditions is not None else sampled[k],
                self.max_turns,
                self.reward_mode,
                self.invalid_penalty,
                best_score=float(self.task.baseline_score),
            )
            self.next_campaign_id += 1
            self.campaigns[slot] = campaign
            if self.recorder is not None:
                self.recorder.campaign_started(campaign)
            started.append(campaign)
        return started

    # ---- advancing them --------------------------------------------------------------

    def step(self, slots: Sequence[int], proposals: Sequence[Any] | np.ndarray) -> list[Record]:
        """Advance each slot's campaign by one proposal; one simulator call for all experiments.

        ``proposals`` may be an array whose rows are the proposals (a vector env's actions):
        every row is then an experiment, and the lab gets the array whole (:meth:`Task.run`).
        """
        slots = list(slots)
        matrix = isinstance(proposals, np.ndarray) and proposals.ndim >= 2
        if not matrix:
            proposals = list(proposals)
        if len(slots) != len(proposals):
            raise ValueError(f"expected {len(slots)} proposals, got {len(proposals)}")
        if len(set(slots)) != len(slots):
            raise ValueError("a slot may take only one proposal per step")
        with paused_gc():  # the harness's work; the lab's code runs with the collector on
            campaigns = [self._live(slot) for slot in slots]
            if matrix:  # rows are arrays: experiments all (none is an Analysis, Answer, Invalid)
                seeds = [integer_below(c.rng, _SEED_LIMIT) for c in campaigns]
                experiments = list(range(len(slots)))
                lab_call = (
                    proposals if type(self.task).run is Task.run else list(proposals),
                    [c.conditions for c in campaigns],
                    seeds,
                )
            else:
                seeds = [  # c.next_seed(), written out
                    None if isinstance(p, Analysis) else integer_below(c.rng, _SEED_LIMIT)
                    for c, p in zip(campaigns, proposals)
                ]
                experiments = [
                    k
                    for k, p in enumerate(proposals)
                    if not isinstance(p, (Analysis, Answer, Invalid))
                ]
                lab_call = (
                    [proposals[k] for k in experiments],
                    [campaigns[k].conditions for k in experiments],
                    [seeds[k] for k in experiments],
                )
            measured = self._lab_run(*lab_call)  # those of the experiments, in their order
            every = len(experiments) == len(campaigns)
            measured_of = campaigns if every else [campaigns[k] for k in experiments]
            vectors = self._vectors(measured)
            records = self._experiments(measured_of, measured, vectors)
            if not every:  # answers, analyses, invalid calls among them
                record_of = dict(zip(experiments, records))
                records = [
                    record_of[k] if k in record_of else self._other(c, proposals[k], seeds[k])
                    for k, c in enumerate(campaigns)
                ]
            self._append_all(campaigns, records)
            ending = self._ending(campaigns, records)
            if ending:  # the lab's call again
                self._confirm(ending)
            if self.recorder is not None:
                for record in records:
                    self.recorder.record(record)
        return records

    def _ending(self, campaigns: list[Campaign], records: list[Record]) -> list[tuple]:
        """``(campaign, record, recommended record)`` of every campaign that ended in this
        step without an answer, where the lab confirms and the campaign measured something."""
        if not self.task.confirms_best:
            return []
        ending = []
        for campaign, record in zip(campaigns, records):
            if not campaign.done or campaign.end_reason == "answer submitted":
                continue
            best = campaign.recommended()
            if best is not None:
                ending.append((campaign, record, best))
        return ending

    def _confirm(self, ending: list[tuple]) -> None:
        """Measure the recommendation of every campaign that ended in this step (one call)."""
        if not ending:
            return
        measured = self._lab_run(
            [best.measurement.experiment for _, _, best in ending],
            [campaign.conditions for campaign, _, _ in ending],
            [campaign.next_seed() for campaign, _, _ in ending],
        )
        for (campaign, record, _), m in zip(ending, measured):
            record.confirmation = m
            record.confirmed_score = confirmed = self.task.score(m, campaign.conditions)
            if self.reward_mode == "improvement":
                record.reward -= max(campaign.best_score - confirmed, 0.0)

    def _lab_run(self, *call: Any) -> list[Measurement]:
        """``task.run(*call)``: :meth:`Task.run` turns the collector on for the lab's simulate
        itself; a lab's own ``run`` runs with it on throughout (:mod:`labtwin.gcpause`)."""
        if type(self.task).run is Task.run:
            return self.task.run(*call)
        with lab_code():
            return self.task.run(*call)

    def _live(self, slot: int) -> Campaign:
        if not 0 <= slot < self.num_slots:
            raise IndexError(f"slot {slot} out of range for {self.num_slots} slots")
        campaign = self.campaigns[slot]
        if campaign is None:
            raise RuntimeError("reset() a slot before stepping it")
        if campaign.done:
            raise RuntimeError("step called on a finished campaign; reset it first")
        return campaign

    def _new_record(self, campaign: Campaign, kind: RecordKind, m: Measurement, **kw) -> Record:
        task, repeats = self.task, None
        if kind == "experiment" and m.ok and task.pool_repeats:
            repeats = campaign.repeats_of(m.experiment)
        history = campaign.measurements() if kind == "answer" else []  # only answers read it
        score = score_of(task, kind, m, campaign.conditions, history, repeats)
        return Record(campaign.id, len(campaign.history), kind, m, score, 0.0, **kw)

    def _vectors(self, measured: list[Measurement]) -> list[np.ndarray | None]:
        """Each measured experiment's point in the numeric view, in order (None for an
        invalid proposal, or where the lab has no numeric view): one array for all."""
        view = self.task.numeric_view
        if view is None:
            return [None] * len(measured)
        with_experiment = [k for k, m in enumerate(measured) if m.experiment is not None]
        dicts = [measured[k].experiment for k in with_experiment]
        out: list[np.ndarray | None]
        if len(with_experiment) == len(measured):
            out = []
        else:
            out = [None] * len(measured)
        vectors = view.vectors_of(dicts)
        if vectors is None:  # not readable from the dicts: validated and converted
            experiments = validate_many(self.task.experiment_model, dicts)
            if any(isinstance(e, Invalid) for e in experiments):  # a recorded experiment no
                experiments = [self.task.experiment_model.model_validate(d) for d in dicts]
            vectors = view.to_vectors(experiments)  # validates: raise as model_validate does
        if not out:  # its rows, as vectors[j] gives them
            return list(vectors)
        for j, k in enumerate(with_experiment):
            out[k] = vectors[j]
        return out

    def _experiments(
        self,
        campaigns: list[Campaign],
        measured: list[Measurement],
        vectors: list[np.ndarray | None],
    ) -> list[Record]:
        """The records of measured experiments, one per campaign (distinct campaigns):
        :meth:`_new_record` and its reward, written out as one loop for the kind that every
        step of a numeric agent takes (the same values)."""
        task = self.task
        score, pool, pooled, improvement = (
            task.score,
            task.pool,
            task.pool_repeats,
            self.reward_mode == "improvement",
        )
        records = []
        for campaign, m, vector in zip(campaigns, measured, vectors):
            experiment = m.experiment
            if pooled and m.status == "ok":  # score_of's pooled branch
                repeats = campaign.repeats_of(experiment)
                s = score(pool([*repeats, m]) if repeats else m, campaign.conditions)
            else:
                s = score(m, campaign.conditions)
            reward = max(s - campaign.best_score, 0.0) if improvement else s
            shown = experiment if experiment is not None else m.proposal
            records.append(
                Record(
                    campaign.id,
                    len(campaign.history),
                    "experiment",
                    m,
                    s,
                    reward,
                    shown,
                    "",
                    vector,
                )
            )
        return records

    def _other(self, campaign: Campaign, proposal: Any, seed: int | None) -> Record:
        """The record of a step that ran no experiment: an answer, an analysis call or an
        invalid call."""
        if isinstance(proposal, Answer):
            return self._answer(campaign, proposal, seed)
        if isinstance(proposal, Analysis):
            return self._analysis_call(campaign, proposal)
        return self._invalid_call(campaign, proposal, seed)

    def _answer(self, campaign: Campaign, proposal: Answer, seed: int) -> Record:
        parsed = self.task.parse_answer(proposal.value)
        if isinstance(parsed, Invalid):
            m = Measurement.invalid(parsed.reason, parsed.raw, task=self.task.id, seed=seed)
            return self._new_record(campaign, "answer", m, proposal=m.proposal)
        value = parsed.model_dump(mode="json")
        m = Measurement("ok", experiment=value, provenance={"task": self.task.id, "seed": seed})
        record = self._new_record(campaign, "answer", m, proposal=value)
        record.reward = record.score
        return record

    def _analysis_call(self, campaign: Campaign, call: Analysis) -> Record:
        proposal = {"name": call.name, "arguments": to_jsonable(call.arguments)}
        tool = self._analysis.get(call.name)
        if tool is None:
            known = ", ".join(self._analysis) or "none"
            m = Measurement.invalid(f"unknown analysis tool {call.name!r}; known: {known}")
            return self._new_record(campaign, "analysis", m, proposal=proposal)
        try:
            note = tool.run(call.arguments, campaign.measurements())
        except (ValueError, TypeError, KeyError, ArithmeticError) as err:
            m = Measurement.invalid(f"{call.name} could not run: {err}", proposal)
            return self._new_record(campaign, "analysis", m, proposal=proposal)
        m = Measurement("ok", provenance={"task": self.task.id, "tool": call.name})
        return self._new_record(campaign, "analysis", m, proposal=proposal, note=note)

    def _invalid_call(self, campaign: Campaign, proposal: Invalid, seed: int) -> Record:
        m = Measurement.invalid(proposal.reason, proposal.raw, task=self.task.id, seed=seed)
        return self._new_record(campaign, "invalid", m, proposal=m.proposal)

    def _append_all(self, campaigns: list[Campaign], records: list[Record]) -> None:
        """Append each record to its campaign (distinct campaigns), keeping the campaign's
        best score, recommendation, repeat index and budget count current, and end the
        campaigns whose step it was."""
        penalty = self.invalid_penalty
        for campaign, record in zip(campaigns, records):
            kind, m = record.kind, record.measurement
            status = m.status
            if status == "invalid":
                record.reward -= penalty
            score = record.score
            if score is not None and kind != "answer" and score > campaign.best_score:
                campaign.best_score = score
            history = campaign.history
            history.append(record)
            turns = len(history)
            if campaign._ranked == turns - 1:  # keep the recommendation (recommended) current
                campaign._ranked = turns
                if kind == "experiment" and status == "ok" and score is not None:
                    best = campaign._best
                    if best is None or score > best.score:
                        campaign._best = record
            if campaign._indexed == turns - 1:  # keep the repeat index (repeats_of) current
                if kind != "experiment" or status != "ok":
                    campaign._indexed = turns
                else:
                    asked, key = campaign._asked
                    if m.experiment is asked and key is not None:
                        campaign._add_to_index(key, m)
                        campaign._indexed = turns
            if campaign._counted == turns - 1:  # keep the budget count (experiments) current
                campaign._counted = turns
                campaign._budgeted += kind != "analysis"
                spent = campaign._budgeted
            else:
                spent = campaign.experiments
            if kind == "answer" and status == "ok":
                campaign.done, campaign.end_reason = True, "answer submitted"
            elif campaign.task.budget - spent <= 0:  # campaign.remaining
                campaign.done, campaign.end_reason = True, "budget spent"
            elif campaign.task.cost_budget is not None and campaign.cost_left <= 0:
                campaign.done, campaign.end_reason = True, "cost budget spent"
            elif campaign.max_turns - turns <= 0:  # turns_left
                campaign.done = True
                campaign.end_reason = f"turn cap reached ({campaign.max_turns} turns)"

    # ---- what views show ---------------------------------------------------------------

    def observation(self, slot: int) -> np.ndarray:
        """The slot's campaign as :func:`observation` gives it (a new array)."""
        self._show([slot])
        return self._obs[slot].copy()

    def observations(self) -> np.ndarray:
        """Every slot's :meth:`observation`, stacked ``(num_slots, 1 + budget, width)``."""
        with paused_gc():
            self._show(range(self.num_slots))
        return self._obs.copy()

    def _show(self, slots: Sequence[int] | range) -> None:
        """Bring the slots' observation rows up to date: write the rows of records added
        since the last look, the header's remaining budget, and (for a new campaign, or
        when its public conditions changed) its conditions, as :func:`observation` would."""
        task, obs = self.task, self._obs
        width, n_act, budget = obs.shape[2], _n_actions(task), task.budget
        public_of = _public_getter(task)
        campaigns, shown_of = self.campaigns, self._shown
        row_slots: list[int] = []
        row_index: list[int] = []
        rows: list[Record] = []
        head_at: list[int] = []
        heads: list[float] = []
        header_at: list[int] = []
        headers: list[np.ndarray] = []
        for slot in slots:
            campaign, shown = campaigns[slot], shown_of[slot]
            if campaign is None or campaign is not shown.campaign:
                obs[slot] = 0.0
                shown.__init__(campaign)
                if campaign is None:
                    continue
            history = campaign.history
            seen = len(history)
            public = public_of(campaign.conditions)
            if seen < shown.seen:  # history was replaced: draw it again
                obs[slot] = observation(task, campaign)
                shown.seen = seen
                shown.written = sum(r.budgeted for r in history)
                shown.public = public
                continue
            if public != shown.public:
                header_at.append(slot)
                headers.append(task.condition_vector(campaign.conditions))
                shown.public = public
            elif seen == shown.seen:
                continue  # nothing new
            new = (history[-1],) if seen == shown.seen + 1 else history[shown.seen :]
            for record in new:
                if record.kind == "analysis":  # not budgeted: no row
                    continue
                if shown.written < budget:
                    row_slots.append(slot)
                    row_index.append(shown.written + 1)
                    rows.append(record)
                shown.written += 1
            shown.seen = seen
            head_at.append(slot)
            # campaign.remaining, from the budget count _append keeps when it is current
            spent = campaign._budgeted if campaign._counted == seen else campaign.experiments
            heads.append((budget - spent) / budget)
        if headers:
            if len({len(h) for h in headers}) == 1:  # one array for all new headers
                obs[header_at, 0, 1 : 1 + len(headers[0])] = _clean(np.array(headers))
            else:
                for slot, conditions in zip(header_at, headers):
                    obs[slot, 0, 1 : 1 + len(conditions)] = _clean(conditions)
        if rows:
            obs[row_slots, row_index] = _clean(_history_rows(task, rows, width, n_act))
        if heads:
            obs[head_at, 0, 0] = _clean(np.array(heads, dtype=np.float64))
            cost = _cost_column(task)
            if cost is not None:
                left = [_cost_left_fraction(campaigns[slot]) for slot in head_at]
                obs[head_at, 0, cost] = _clean(np.array(left, dtype=np.float64))

    def frame(self, slot: int, title: str | None = None) -> np.ndarray:
        """The slot's campaign and its lab's panel (:meth:`Task.frame_panel`) as an image."""
        campaign = self.campaigns[slot]
        history = campaign.history if campaign else []
        panel = self.task.frame_panel(list(history), campaign.conditions if campaign else {})
        points = campaign_points(history)
        title = title or self.task.id
        return lab_frame(title, points, self.task.budget, panel, score_range=self.task.score_range)


def replay(
    task: Task,
    seed: int,
    records: Sequence[Record],
    conditions: dict[str, Any] | None = None,
    **batch_kwargs: Any,
) -> list[Record]:
    """Run a campaign again from its seed and recorded proposals; returns the new records.

    ``conditions`` replace the sampled ones (for a campaign that was started
    with given conditions); ``batch_kwargs`` are the campaign's settings
    (``reward_mode``, ``invalid_penalty``, ``max_turns``), which
    :meth:`labtwin.runs.Run.replay` reads from the run. The replayed campaign
    keeps the recorded campaign's id, so its records compare equal to the
    recorded ones (``Record.to_dict(artifacts=False)``).
    """
    if records:
        batch_kwargs.setdefault("first_campaign_id", records[0].campaign)
    batch = CampaignBatch(task, 1, **batch_kwargs)
    batch.reset([0], [seed], None if conditions is None else [conditions])
    out = []
    for record in records:
        out += batch.step([0], [record.replay_proposal()])
    return out


# ---- the numeric observation ---------------------------------------------------------------

OBS_LIMIT = 1e6  # bound on scaled observables and scores in the numeric observation


def _n_actions(task: Task) -> int:
    return task.numeric_view.space.shape[0] if task.numeric_view else 0


def observation_width(task: Task) -> int:
    """Columns: the wider of a history row and the header row."""
    history_row = 2 + _n_actions(task) + len(task.observables) + 1
    header = 1 + len(task.public_conditions) + (task.cost_budget is not None)
    return max(history_row, header)


def _cost_column(task: Task) -> int | None:
    """The header column of the cost budget left (a fraction), after the public
    conditions; None for a task without a cost budget."""
    return None if task.cost_budget is None else 1 + len(task.public_conditions)


def _cost_left_fraction(campaign: Campaign) -> float:
    """The campaign's cost budget left, as a fraction in [0, 1]."""
    return max(campaign.cost_left, 0.0) / campaign.task.cost_budget


def observation_space(task: Task) -> gym.spaces.Box:
    """Space of :func:`observation`: flags in [0, 1], actions in [-1, 1], values within 1e6."""
    n_act = _n_actions(task)
    low = np.full((task.budget + 1, observation_width(task)), -OBS_LIMIT, dtype=np.float32)
    high = np.full_like(low, OBS_LIMIT)
    low[0, 0], high[0, 0] = 0.0, 1.0
    cost = _cost_column(task)
    if cost is not None:
        low[0, cost], high[0, cost] = 0.0, 1.0
    low[1:, :2], high[1:, :2] = 0.0, 1.0
    low[1:, 2 : 2 + n_act], high[1:, 2 : 2 + n_act] = -1.0, 1.0
    return gym.spaces.Box(low, high, dtype=np.float32)


_UNSHOWN = object()  # no public conditions in the header yet


class _Shown:
    """How much of a slot's campaign its observation rows hold."""

    __slots__ = ("campaign", "seen", "written", "public")

    def __init__(self, campaign: Campaign | None = None) -> None:
        self.campaign = campaign
        self.seen = 0  # records of its history looked at
        self.written = 0  # budgeted records among them (history rows, capped at the budget)
        self.public: Any = _UNSHOWN  # public condition values in the header


def _public_getter(task: Task) -> Any:
    """conditions -> the values of the lab's public conditions (a key to compare)."""
    names = [spec.name for spec in task.public_conditions]
    if not names:
        return lambda conditions: ()
    return operator.itemgetter(*names)


def _clean(values: np.ndarray) -> np.ndarray:
    """What :func:`observation` makes of float64 values: NaN to 0, clipped to the limit
    (clipping in float64 before the cast to float32 gives the same float32 as after)."""
    values = np.nan_to_num(values, nan=0.0, posinf=OBS_LIMIT, neginf=-OBS_LIMIT)
    return np.clip(values, -OBS_LIMIT, OBS_LIMIT)


_shape = operator.attrgetter("shape")


def _history_rows(task: Task, records: list[Record], width: int, n_act: int) -> np.ndarray:
    """Rows of :func:`observation` for budgeted records, before cleaning, as float64,
    built a column at a time (the same values as :func:`_history_row` row by row)."""
    vectors = [r.vector for r in records]
    if n_act and (  # every vector an array of shape (n_act,), checked a map at a time
        set(map(type, vectors)) != {np.ndarray} or set(map(_shape, vectors)) != {(n_act,)}
    ):
        return np.array([_history_row(task, r, width, n_act) for r in records])
    block = np.zeros((len(records), width), dtype=np.float64)
    measurements = [r.measurement for r in records]
    ok = [m.status == "ok" for m in measurements]  # m.ok
    block[:, 0] = 1.0
    block[:, 1] = ok
    if n_act:  # one concatenation (np.stack makes a view of every vector first)
        block[:, 2 : 2 + n_act] = np.concatenate(vectors).reshape(len(records), n_act)
    measured = [i for i, r in enumerate(records) if ok[i] and r.kind == "experiment"]
    if measured:
        rows = slice(None) if len(measured) == len(records) else measured
        for j, spec in enumerate(task.observables):
            name, scale = spec.name, spec.scale
            block[rows, 2 + n_act + j] = [
                measurements[i].observables[name].value / scale for i in measured
            ]
    block[:, -1] = [r.score if r.score is not None else 0.0 for r in records]
    return block


def _history_row(task: Task, record: Record, width: int, n_act: int) -> list[float]:
    """Row ``k + 1`` of :func:`observation` for budgeted record ``k``, before cleaning:
    ``[filled, ok, action..., observable / scale..., zeros..., score]``."""
    m = record.measurement
    vector = record.vector
    if vector is None:
        action = [0.0] * n_act
    elif isinstance(vector, np.ndarray) and vector.shape == (n_act,):
        action = vector.tolist()
    else:
        action = np.broadcast_to(np.asarray(vector, dtype=np.float32), (n_act,)).tolist()
    specs = task.observables
    if m.ok and record.kind == "experiment":
        observed = [m.observables[spec.name].value / spec.scale for spec in specs]
    else:
        observed = [0.0] * len(specs)
    score = record.score if record.score is not None else 0.0
    pad = [0.0] * (width - 3 - n_act - len(specs))
    return [1.0, 1.0 if m.ok else 0.0, *action, *observed, *pad, score]


def observation(task: Task, campaign: Campaign | None) -> np.ndarray:
    """The campaign as a ``(1 + budget, width)`` float32 array, zero-padded.

    Row 0 is the header: ``[remaining budget / budget, public condition / scale...]``,
    then, for a task with a cost budget, the cost budget left as a fraction of it: the
    same facts an LLM is told as text. Row ``k + 1`` describes budgeted
    step ``k``: ``[filled, ok, action..., observable / scale..., score]``
    (text labs have no action columns; the action is zero for invalid proposals).
    """
    n_act = _n_actions(task)
    obs = np.zeros((task.budget + 1, observation_width(task)), dtype=np.float32)
    if campaign is None:
        return obs
    obs[0, 0] = campaign.remaining / task.budget
    conditions = task.condition_vector(campaign.conditions)
    obs[0, 1 : 1 + len(conditions)] = conditions
    cost = _cost_column(task)
    if cost is not None:
        obs[0, cost] = _cost_left_fraction(campaign)
    budgeted = [r for r in campaign.history if r.budgeted]
    for k, record in enumerate(budgeted[: task.budget]):
        row = obs[k + 1]
        m = record.measurement
        row[0] = 1.0
        row[1] = 1.0 if m.ok else 0.0
        if record.vector is not None:
            row[2 : 2 + n_act] = record.vector
        if m.ok and record.kind == "experiment":
            for j, spec in enumerate(task.observables):
                row[2 + n_act + j] = m.observables[spec.name].value / spec.scale
        row[-1] = record.score if record.score is not None else 0.0
    np.nan_to_num(obs, copy=False, nan=0.0, posinf=OBS_LIMIT, neginf=-OBS_LIMIT)
    np.clip(obs, -OBS_LIMIT, OBS_LIMIT, out=obs)
    return obs
