"""Campaigns on Ray: lab workers as actors, each stepping a shard of the campaigns.

:class:`RayCampaignBatch` has the public interface of
:class:`~labtwin.campaign.CampaignBatch` (``reset``, ``step``, ``observation``,
``frame``, ``campaigns``) and gives the same records for the same seeds:

- the driver keeps a ledger, an ordinary :class:`CampaignBatch` over all slots.
  It starts campaigns (so seeds, conditions, campaign ids and the recorder's
  ``campaign_started`` are exactly the local ones), holds every campaign's
  history, and draws observations and frames;
- ``num_workers`` :class:`LabWorker` actors each own a contiguous shard of the
  slots, as a :class:`CampaignBatch` of their own on their own device (a GPU per
  worker where the cluster has enough, in a placement group, one bundle each);
  a step sends each shard its proposals (with the campaigns started since its last
  step) in one call, waits on all shards together (``ray.wait``) and gathers the
  records in the order of the proposals; each campaign's state after the step
  (its generator, best score, end) comes back with them into the ledger;
- a worker that dies (a segfault in native code, the out-of-memory killer, a
  lost node) or runs past ``timeout_s`` is replaced in its bundle by a new actor
  that is given its shard's campaigns from the ledger, and the shard's proposals
  of the step are retried once there, each alone, so one experiment that crashes
  its worker does not fail its batch-mates. One that fails again is recorded as
  ``failed`` with the reason (the campaign's seed for it is spent as for any
  experiment, so its later steps are the same as anywhere else). The step
  completes; the recorder on the driver has everything recorded before.
  An exception raised by the lab (a bug) is re-raised, as locally.

Batching does not change a campaign's measurements (each experiment has its own
generator), so a shard's step, or a retried experiment alone, measures what the
local batch measures. Ray is imported here only; nothing else in labtwin imports
this module unless asked for Ray (``labtwin run --ray``).
"""

from __future__ import annotations

import copy
import dataclasses
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from labtwin.campaign import Campaign, CampaignBatch, Record, RewardMode
from labtwin.measurement import Measurement
from labtwin.task import Task

RETRIED = "retried once alone on a new lab worker"


def connect(address: str | None = "auto", **init_kwargs: Any) -> bool:
    """Join a Ray cluster (``address``: ``"auto"`` finds a running one or starts a local
    one, ``"local"`` always starts a local one, else a head node's ``host:port`` or
    ``ray://host:port``). Returns whether this call started Ray (and so should shut it
    down); an already initialised Ray is used as it is."""
    if ray.is_initialized():
        return False
    init_kwargs.setdefault("include_dashboard", False)
    init_kwargs.setdefault("log_to_driver", False)
    if address in (None, "auto"):
        ray.init(**init_kwargs)  # Ray's own rule: RAY_ADDRESS, a running cluster, or a new one
    elif address == "local":
        ray.init(address="local", **init_kwargs)
    else:
        ray.init(address=address, **init_kwargs)
    return True


def default_workers(num_slots: int) -> int:
    """Lab workers when none are asked for: one per GPU of the cluster, else one per CPU,
    at most one per campaign slot."""
    resources = ray.cluster_resources()
    per = int(resources.get("GPU", 0)) or int(resources.get("CPU", 1))
    return max(1, min(num_slots, per))


@contextmanager
def on_ray(
    env: Any,
    address: str | None = "auto",
    workers: int | None = None,
    task_spec: tuple[str, dict[str, Any]] | None = None,
    **batch_kwargs: Any,
) -> Iterator[RayCampaignBatch]:
    """Step a view's campaigns (``env.batch``: a :class:`~labtwin.vector.VectorLabEnv`'s,
    before its first reset) on Ray lab workers: the view keeps its settings and recorder;
    on exit the workers end, and Ray too if this started it."""
    started = connect(address or "auto")
    try:
        local = env.batch
        batch = RayCampaignBatch(
            local.task,
            local.num_slots,
            local.reward_mode,
            local.invalid_penalty,
            local.max_turns,
            local.recorder,
            local.next_campaign_id,
            workers=workers or default_workers(local.num_slots),
            task_spec=task_spec,
            **batch_kwargs,
        )
        env.batch = batch
        try:
            yield batch
        finally:
            batch.close()
    finally:
        if started:
            ray.shutdown()


class LabWorker:
    """A Ray actor stepping a shard of campaigns: a :class:`CampaignBatch` of its own.

    ``task`` is a :class:`Task` or ``(task_id, kwargs)``, built here, so that a lab that
    picks its device at construction picks this actor's GPU (Ray sets
    ``CUDA_VISIBLE_DEVICES`` per actor).
    """

    def __init__(self, task: Task | tuple[str, dict[str, Any]]) -> None:
        if isinstance(task, tuple):
            from labtwin.registry import load_task

            task = load_task(task[0], **task[1])
        self.task = task
        self.batch: CampaignBatch | None = None

    def configure(self, num_slots: int, batch_kwargs: dict[str, Any]) -> None:
        """A new, empty batch of ``num_slots`` slots (campaigns come with :meth:`step`)."""
        self.batch = CampaignBatch(self.task, num_slots, **batch_kwargs)

    def ready(self) -> dict[str, Any]:
        """The worker's process id, host and GPUs (once its lab is built)."""
        return {
            "pid": os.getpid(),
            "node": ray.get_runtime_context().get_node_id(),
            "gpus": [str(g) for g in ray.get_gpu_ids()],
        }

    def step(
        self,
        installs: list[tuple[int, Campaign]],
        slots: list[int],
        proposals: list[Any],
        failure: str | None = None,
    ) -> tuple[list[Record], list[tuple[dict, float, bool, str]]]:
        """Install campaigns from the ledger, step ``slots`` and return the records and each
        campaign's state after them. ``failure``: the lab is not called; every experiment
        is measured as ``failed`` with that reason (after two crashes)."""
        for slot, campaign in installs:
            campaign.task = self.task
            self.batch.campaigns[slot] = campaign
        if failure is None:
            records = self.batch.step(slots, proposals)
        else:
            self.batch.task = _failing(self.task, failure)
            try:
                records = self.batch.step(slots, proposals)
            finally:
                self.batch.task = self.task
        return records, [_state(self.batch.campaigns[s]) for s in slots]


def _failing(task: Task, reason: str) -> Task:
    """A copy of the lab whose simulator returns ``failed`` measurements: the lab's own
    ``run`` still validates the proposals and finishes the measurements (experiment,
    provenance), so they read as any failed measurement."""
    lab = copy.copy(task)
    lab.isolation = False
    lab.simulate = lambda experiments, conditions, rngs: [  # type: ignore[method-assign]
        Measurement.failed(reason) for _ in experiments
    ]
    return lab


def _state(campaign: Campaign) -> tuple[dict, float, bool, str]:
    return campaign.rng.bit_generator.state, campaign.best_score, campaign.done, campaign.end_reason


def _shipped(campaign: Campaign) -> Campaign:
    """The campaign as it travels to a worker: without its lab (the worker has its own)."""
    return dataclasses.replace(campaign, task=None, history=list(campaign.history))


class LabWorkers:
    """``num_workers`` :class:`LabWorker` actors in a placement group, one bundle each.

    ``task`` is the lab; ``task_spec`` (a lab id and its keyword arguments) makes each
    worker build the lab itself, on its own device; without it the lab object is pickled
    to them. ``num_cpus``/``num_gpus`` are each worker's bundle (``num_gpus=None``: one GPU
    each where the cluster has a GPU per worker, else none); ``strategy`` is the placement
    group's (``PACK``: as few nodes as fit; ``SPREAD``: one node each where possible).
    Ray must be initialised (:func:`connect`). Many :class:`RayCampaignBatch` may use the
    same workers one after another (a trainer's rollouts do); :meth:`close` ends them.
    """

    def __init__(
        self,
        task: Task,
        num_workers: int = 2,
        task_spec: tuple[str, dict[str, Any]] | None = None,
        num_cpus: float = 1.0,
        num_gpus: float | None = None,
        strategy: str = "PACK",
        startup_timeout_s: float = 300.0,
    ) -> None:
        if num_workers < 1:
            raise ValueError(f"num_workers must be at least 1, got {num_workers}")
        self.task = task
        self.startup_timeout_s = float(startup_timeout_s)
        if num_gpus is None:
            gpus = ray.cluster_resources().get("GPU", 0.0)
            num_gpus = 1.0 if gpus >= num_workers else 0.0
        bundle = {"CPU": float(num_cpus), **({"GPU": float(num_gpus)} if num_gpus else {})}
        self._pg = placement_group([dict(bundle)] * num_workers, strategy=strategy)
        self._options = {"num_cpus": float(num_cpus), "num_gpus": float(num_gpus)}
        self._task_arg = task_spec if task_spec is not None else task
        ray.get(self._pg.ready(), timeout=self.startup_timeout_s)
        self.actors: list[Any] = [self._start(w) for w in range(num_workers)]
        #: each worker's process id, node and GPU ids
        self.info: list[dict[str, Any]] = ray.get(
            [a.ready.remote() for a in self.actors], timeout=self.startup_timeout_s
        )
        #: (worker index, reason) of each replacement, in order
        self.replacements: list[tuple[int, str]] = []

    def __len__(self) -> int:
        return len(self.actors)

    def _start(self, w: int) -> Any:
        strategy = PlacementGroupSchedulingStrategy(self._pg, placement_group_bundle_index=w)
        actor = ray.remote(LabWorker).options(
            scheduling_strategy=strategy, max_restarts=0, **self._options
        )
        return actor.remote(self._task_arg)

    def replace(self, w: int, reason: str) -> Any:
        """A new actor in worker ``w``'s bundle (the old one is killed if it still lives)."""
        ray.kill(self.actors[w], no_restart=True)  # a hung one; a dead one is gone already
        self.replacements.append((w, reason))
        self.actors[w] = self._start(w)
        try:
            self.info[w] = ray.get(self.actors[w].ready.remote(), timeout=self.startup_timeout_s)
        except (RayActorError, GetTimeoutError) as err:
            raise RuntimeError(f"lab worker {w} could not be replaced after: {reason}") from err
        return self.actors[w]

    def close(self) -> None:
        """End the workers and free their placement group."""
        for actor in self.actors:
            ray.kill(actor, no_restart=True)
        self.actors = []
        remove_placement_group(self._pg)

    def __enter__(self) -> LabWorkers:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class RayCampaignBatch:
    """:class:`~labtwin.campaign.CampaignBatch` whose steps run on Ray lab workers.

    The first arguments are :class:`CampaignBatch`'s. ``workers``: a :class:`LabWorkers`
    to use, or how many to start (then ``worker_kwargs`` go to :class:`LabWorkers` and
    :meth:`close` ends them). Each worker owns a contiguous shard of the slots (workers
    beyond the number of slots stay idle). ``timeout_s`` bounds a step of a shard (None:
    the lab's ``simulation_timeout_s``).
    """

    def __init__(
        self,
        task: Task,
        num_slots: int,
        reward_mode: RewardMode = "improvement",
        invalid_penalty: float = 0.0,
        max_turns: int | None = None,
        recorder: Any = None,
        first_campaign_id: int = 0,
        *,
        workers: int | LabWorkers = 2,
        timeout_s: float | None = None,
        **worker_kwargs: Any,
    ) -> None:
        self.ledger = CampaignBatch(
            task, num_slots, reward_mode, invalid_penalty, max_turns, recorder, first_campaign_id
        )
        self.timeout_s = float(task.simulation_timeout_s if timeout_s is None else timeout_s)
        self._owns = not isinstance(workers, LabWorkers)
        self.pool = LabWorkers(task, workers, **worker_kwargs) if self._owns else workers
        shards = np.array_split(np.arange(num_slots), min(len(self.pool), num_slots))
        self.shards = [s.tolist() for s in shards]
        self._where = {
            s: (w, k) for w, shard in enumerate(self.shards) for k, s in enumerate(shard)
        }
        self._fresh: set[int] = set()  # slots reset since their worker last had them
        self._batch_kwargs = {
            "reward_mode": reward_mode,
            "invalid_penalty": invalid_penalty,
            "max_turns": self.ledger.max_turns,
        }
        ray.get([self._configure(w) for w in range(len(self.shards))])

    @property
    def workers(self) -> list[Any]:
        return self.pool.actors

    @property
    def worker_info(self) -> list[dict[str, Any]]:
        return self.pool.info

    @property
    def replacements(self) -> list[tuple[int, str]]:
        return self.pool.replacements

    def _configure(self, w: int) -> ray.ObjectRef:
        return self.pool.actors[w].configure.remote(len(self.shards[w]), self._batch_kwargs)

    # ---- the CampaignBatch interface -----------------------------------------------------

    task = property(lambda self: self.ledger.task)
    num_slots = property(lambda self: self.ledger.num_slots)
    reward_mode = property(lambda self: self.ledger.reward_mode)
    invalid_penalty = property(lambda self: self.ledger.invalid_penalty)
    max_turns = property(lambda self: self.ledger.max_turns)
    campaigns = property(lambda self: self.ledger.campaigns)

    @property
    def recorder(self) -> Any:
        return self.ledger.recorder

    @recorder.setter
    def recorder(self, value: Any) -> None:
        self.ledger.recorder = value

    @property
    def next_campaign_id(self) -> int:
        return self.ledger.next_campaign_id

    def reset(
        self,
        slots: Sequence[int] | None = None,
        seeds: Sequence[int | None] | None = None,
        conditions: Sequence[dict[str, Any]] | None = None,
    ) -> list[Campaign]:
        """Start campaigns in the ledger; each goes to its worker with the next step."""
        started = self.ledger.reset(slots, seeds, conditions)
        self._fresh.update(range(self.num_slots) if slots is None else slots)
        return started

    def observation(self, slot: int) -> np.ndarray:
        return self.ledger.observation(slot)

    def observations(self) -> np.ndarray:
        """Every slot's observation, stacked (the ledger's)."""
        return self.ledger.observations()

    def __getattr__(self, name: str) -> Any:
        """Anything else of the CampaignBatch interface that only reads: the ledger's."""
        ledger = self.__dict__.get("ledger")
        if ledger is None or name.startswith("_"):
            raise AttributeError(name)
        return getattr(ledger, name)

    def frame(self, slot: int, title: str | None = None) -> np.ndarray:
        return self.ledger.frame(slot, title)

    def step(self, slots: Sequence[int], proposals: Sequence[Any]) -> list[Record]:
        """Advance each slot's campaign by one proposal: one call per shard, all at once."""
        slots, proposals = list(slots), list(proposals)
        if len(slots) != len(proposals):
            raise ValueError(f"expected {len(slots)} proposals, got {len(proposals)}")
        if len(set(slots)) != len(slots):
            raise ValueError("a slot may take only one proposal per step")
        for slot in slots:
            self.ledger._live(slot)  # the local engine's checks and messages
        by_worker: dict[int, list[int]] = {}
        for k, slot in enumerate(slots):
            by_worker.setdefault(self._where[slot][0], []).append(k)
        calls = {
            self._submit(w, [slots[k] for k in ks], [proposals[k] for k in ks]): w
            for w, ks in by_worker.items()
        }
        records: dict[int, Record] = {}
        for w, outcome in self._gather(calls).items():
            ks = by_worker[w]
            if isinstance(outcome, str):
                self._replace(w, outcome)
                for k in ks:
                    records[k] = self._retry(w, slots[k], proposals[k], outcome)
            else:
                for k, record, state in zip(ks, *outcome):
                    records[k] = self._apply(slots[k], record, state)
        out = [records[k] for k in range(len(slots))]
        if self.ledger.recorder is not None:
            for record in out:
                self.ledger.recorder.record(record)
        return out

    def close(self) -> None:
        """End the workers if this batch started them."""
        if self._owns:
            self.pool.close()

    def __enter__(self) -> RayCampaignBatch:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- calls to the workers ------------------------------------------------------------

    def _submit(
        self, w: int, slots: list[int], proposals: list[Any], failure: str | None = None
    ) -> ray.ObjectRef:
        """One step call of worker ``w`` (global slots), with the campaigns reset since."""
        fresh = [s for s in self.shards[w] if s in self._fresh]
        installs = [(self._where[s][1], _shipped(self.campaigns[s])) for s in fresh]
        self._fresh.difference_update(fresh)  # put back by _replace if the call fails
        local = [self._where[s][1] for s in slots]
        return self.workers[w].step.remote(installs, local, proposals, failure)

    def _gather(self, calls: dict[ray.ObjectRef, int]) -> dict[int, Any]:
        """Each call's ``(records, states)``, or the reason it failed: the worker died or
        the call ran past the timeout (all calls started together)."""
        outcome: dict[int, Any] = {}
        pending = dict(calls)
        deadline = time.monotonic() + self.timeout_s
        while pending:
            ready, _ = ray.wait(
                list(pending), num_returns=1, timeout=max(0.0, deadline - time.monotonic())
            )
            if not ready:
                for w in pending.values():
                    outcome[w] = f"the lab worker timed out after {self.timeout_s:g} s"
                break
            for ref in ready:
                w = pending.pop(ref)
                try:
                    outcome[w] = ray.get(ref)
                except RayActorError as err:
                    outcome[w] = death_reason(err)
                except RayTaskError as err:  # the lab raised: a bug, re-raised as locally
                    raise err.as_instanceof_cause() from None
        return outcome

    def _replace(self, w: int, reason: str) -> None:
        """A new worker ``w``, which gets its shard's campaigns from the ledger with its next call."""
        self.pool.replace(w, reason)
        try:
            ray.get(self._configure(w), timeout=self.pool.startup_timeout_s)
        except (RayActorError, GetTimeoutError) as err:
            raise RuntimeError(f"lab worker {w} could not be replaced after: {reason}") from err
        self._fresh.update(s for s in self.shards[w] if self.campaigns[s] is not None)

    def _retry(self, w: int, slot: int, proposal: Any, reason: str) -> Record:
        """The proposal alone on the new worker ``w``; ``failed`` if that fails as well."""
        outcome = self._gather({self._submit(w, [slot], [proposal]): w})[w]
        if isinstance(outcome, str):
            self._replace(w, outcome)
            failure = f"{outcome}; {RETRIED}"
            outcome = self._gather({self._submit(w, [slot], [proposal], failure): w})[w]
            if isinstance(outcome, str):
                raise RuntimeError(f"lab worker {w} failed without simulating: {outcome}")
        (record,), (state,) = outcome
        return self._apply(slot, record, state)

    def _apply(self, slot: int, record: Record, state: tuple[dict, float, bool, str]) -> Record:
        """The worker's record and campaign state into the ledger."""
        campaign = self.campaigns[slot]
        campaign.history.append(record)
        rng_state, campaign.best_score, campaign.done, campaign.end_reason = state
        campaign.rng.bit_generator.state = rng_state
        return record


def death_reason(err: RayActorError) -> str:
    """Why a lab worker died, in words (:func:`actor_death`)."""
    return actor_death(err, "lab worker")


def actor_death(err: RayActorError, role: str) -> str:
    """Why an actor died, in words: Ray's exit detail, up to its list of usual causes
    (a signal such as SIGSEGV, the out-of-memory killer and ``ray stop`` read alike to Ray)."""
    text = str(err).strip()
    detail = text.split("exit detail:", 1)[1] if "exit detail:" in text else text
    detail = detail.split("Some common causes", 1)[0].strip().split("\n")[0]
    return f"the {role} process died ({detail[:200]})"
