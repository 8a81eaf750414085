"""``VectorLabEnv``: many campaigns of one lab, stepped by one batched simulator call.

Unlike Gymnasium's ``SyncVectorEnv`` this is not a loop over environments:
it is a :class:`~labtwin.campaign.CampaignBatch` with one slot per instance,
so each ``step`` sends every campaign's experiment to the lab's simulator
together. Instance ``i`` reset with ``seed + i`` gives exactly what ``LabEnv``
reset with ``seed + i`` gives.

Autoreset follows Gymnasium's ``autoreset_mode``:

- ``NEXT_STEP`` (default): the step after a campaign ends resets it (the
  action for it is ignored) and returns its first observation;
- ``SAME_STEP``: a campaign that ends is reset in the same step; the
  observation returned is the new campaign's first one, and the final
  observation and info are in ``infos["final_obs"]`` and ``infos["final_info"]``
  (masked by ``infos["_final_obs"]``), as Gymnasium's own vector envs do.
"""

from __future__ import annotations

from itertools import repeat
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from labtwin.campaign import Campaign, CampaignBatch, RewardMode, observation_space
from labtwin.env import ActionView, action_space, check_render_mode, reset_info, step_info
from labtwin.gcpause import paused_gc
from labtwin.task import Task

AUTORESET_MODES = (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP)


def _autoreset_mode(mode: AutoresetMode | str) -> AutoresetMode:
    """An ``AutoresetMode``, also from its value or name ("SameStep", "same_step")."""
    if isinstance(mode, str):
        key = mode.replace("_", "").lower()
        mode = next(
            (
                m
                for m in AUTORESET_MODES
                if key in (m.value.lower(), m.name.replace("_", "").lower())
            ),
            mode,
        )
    if mode not in AUTORESET_MODES:
        raise ValueError(
            f"autoreset_mode must be one of {[m.value for m in AUTORESET_MODES]}, got {mode!r}"
        )
    return mode


class VectorLabEnv(VectorEnv):
    metadata = {"render_modes": ["rgb_array"], "autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(
        self,
        task: Task,
        num_envs: int,
        render_mode: str | None = None,
        reward_mode: RewardMode = "improvement",
        invalid_penalty: float = 0.0,
        max_turns: int | None = None,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        recorder: Any = None,
        action_view: ActionView = "auto",
    ) -> None:
        check_render_mode(render_mode)
        autoreset_mode = _autoreset_mode(autoreset_mode)
        self.metadata = {**self.metadata, "autoreset_mode": autoreset_mode}
        self.task = task
        self.batch = CampaignBatch(
            task, num_envs, reward_mode, invalid_penalty, max_turns, recorder=recorder
        )
        self.num_envs = num_envs
        self.render_mode = render_mode
        self.autoreset_mode = autoreset_mode
        self.single_action_space = action_space(task, action_view)
        self.single_observation_space = observation_space(task)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self._needs_reset = np.zeros(num_envs, dtype=bool)

    @property
    def campaigns(self) -> list[Campaign | None]:
        return self.batch.campaigns

    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        if isinstance(seed, (int, np.integer)):
            seeds: list[int | None] = [int(seed) + i for i in range(self.num_envs)]
        elif seed is None:
            seeds = [None] * self.num_envs
        else:
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise ValueError(f"expected {self.num_envs} seeds, got {len(seeds)}")
        if seeds[0] is not None:
            super().reset(seed=seeds[0])
        started = self.batch.reset(range(self.num_envs), seeds)
        self._needs_reset[:] = False
        infos = vector_infos({}, self.num_envs, [(i, reset_info(c)) for i, c in enumerate(started)])
        return self._observations(), infos

    def step(
        self, actions: Any
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step every campaign; ``actions`` is an array ``(num_envs, d)`` or a list of proposals."""
        with paused_gc():  # one pause: each resumption sets off a collection (labtwin.gcpause)
            if any(c is None for c in self.campaigns):
                raise RuntimeError("call reset() before step()")
            # an array of actions stays one: the lab converts its rows together (parse_batch)
            matrix = isinstance(actions, np.ndarray) and actions.ndim >= 2
            proposals = actions if matrix else list(actions)
            if len(proposals) != self.num_envs:
                raise ValueError(f"expected {self.num_envs} actions, got {len(proposals)}")
            rewards = np.zeros(self.num_envs, dtype=np.float64)
            terminated = np.zeros(self.num_envs, dtype=bool)
            truncated = np.zeros(self.num_envs, dtype=bool)

            resetting = np.flatnonzero(self._needs_reset).tolist()
            started = self.batch.reset(resetting)
            live = np.flatnonzero(~self._needs_reset).tolist()
            if matrix:
                stepped = proposals if len(live) == self.num_envs else proposals[live]
            else:
                stepped = [proposals[i] for i in live]
            records = self.batch.step(live, stepped)
            campaigns = self.campaigns
            rewards[live] = [record.reward for record in records]
            terminated[live] = [campaigns[i].done for i in live]
            infos = self._step_infos(resetting, started, live, records)
            obs = self._observations()
            ended = np.flatnonzero(terminated | truncated).tolist()
            if self.autoreset_mode == AutoresetMode.SAME_STEP and ended:
                record_of = dict(zip(live, records))
                final = [  # Gymnasium's layout: infos["final_obs"], infos["final_info"]
                    (
                        i,
                        {
                            "final_obs": obs[i].copy(),
                            "final_info": step_info(campaigns[i], record_of[i]),
                        },
                    )
                    for i in ended
                ]
                infos = vector_infos(infos, self.num_envs, final)
                self.batch.reset(ended)
                obs = self._observations()
            else:
                self._needs_reset = terminated | truncated
            return obs, rewards, terminated, truncated, infos

    def _step_infos(
        self,
        resetting: list[int],
        started: list[Campaign],
        live: list[int],
        records: list[Any],
    ) -> dict[str, Any]:
        """The step's infos: the resets' first, then each stepped campaign's."""
        campaigns = self.campaigns
        if not resetting and records and all(r.confirmed_score is None for r in records):
            return _step_info_columns(self.num_envs, [campaigns[i] for i in live], live, records)
        entries = [(i, reset_info(c)) for i, c in zip(resetting, started)]
        entries += [(i, step_info(campaigns[i], r)) for i, r in zip(live, records)]
        return vector_infos({}, self.num_envs, entries)

    def _observations(self) -> np.ndarray:
        return self.batch.observations()

    def render(self) -> tuple[np.ndarray, ...] | None:
        if self.render_mode != "rgb_array":
            return None
        return tuple(
            self.batch.frame(i, f"{self.task.id} [{i}]")
            for i, c in enumerate(self.campaigns)
            if c is not None
        )


def _objects(values: list[Any]) -> np.ndarray:
    """A 1-d object array holding ``values`` as they are (never read as sequences)."""
    return np.fromiter(values, dtype=object, count=len(values))


def _step_info_columns(
    num_envs: int, campaigns: list[Campaign], envs: list[int], records: list[Any]
) -> dict[str, Any]:
    """``vector_infos({}, num_envs, [(i, step_info(c, r)) ...])`` where no record carries a
    confirmation (every info then has :func:`step_info`'s seven keys, in its order): the
    same arrays, masks, dtypes and key order, a column at a time from the records."""
    mask = np.zeros(num_envs, dtype=np.bool_)
    mask[envs] = True
    nan = float("nan")
    columns: list[tuple[str, np.ndarray]] = [
        ("kind", _objects([r.kind for r in records])),
        ("measurement", _objects([r.measurement for r in records])),
        ("status", _objects([r.measurement.status for r in records])),
        (
            "score",
            np.array([float(r.score) if r.score is not None else nan for r in records]),
        ),
        ("best_score", np.array([float(c.best_score) for c in campaigns], dtype=np.float64)),
        ("experiments_done", np.array([c.experiments for c in campaigns], dtype=np.int_)),
        ("end_reason", _objects([c.end_reason for c in campaigns])),
    ]
    infos: dict[str, Any] = {}
    every = len(envs) == num_envs  # envs are distinct slots, in order: then 0 .. num_envs - 1
    for key, values in columns:
        if every:  # the column is the array
            array = values
        elif values.dtype == object:
            array = np.full(num_envs, fill_value=None, dtype=object)
            array[envs] = values
        else:
            array = np.zeros(num_envs, dtype=values.dtype)
            array[envs] = values
        infos[key], infos[f"_{key}"] = array, mask.copy()
    return infos


def _new_info_array(value: Any, num_envs: int) -> np.ndarray:
    """The array ``VectorEnv._add_info`` makes for a key whose first value is ``value``."""
    if type(value) in (int, float, bool) or issubclass(type(value), np.number):
        return np.zeros(num_envs, dtype=type(value))
    if isinstance(value, np.ndarray):
        return np.zeros((num_envs, *value.shape), dtype=value.dtype)
    return np.full(num_envs, fill_value=None, dtype=object)


def vector_infos(
    infos: dict[str, Any], num_envs: int, entries: list[tuple[int, dict[str, Any]]]
) -> dict[str, Any]:
    """``infos`` with each ``(env index, info)`` of ``entries`` added, in order, exactly as
    Gymnasium's ``VectorEnv._add_info`` adds them one env at a time (the same keys, key
    order, dtypes, ``_key`` masks, nested dicts and ``final_obs`` object array), built a
    key at a time: one array assignment per key instead of one per env and key."""
    groups: dict[tuple[str, ...], list[list]] = {}  # entries by their keys, in order
    for position, (i, info) in enumerate(entries):
        keys = tuple(info)
        group = groups.get(keys)
        if group is None:
            groups[keys] = group = [[], [], []]
        group[0].append(position)
        group[1].append(i)
        group[2].append(info.values())
    columns: dict[str, list[list]] = {}  # key -> [positions, envs, values], keys as first seen
    for keys, (positions, envs, rows) in groups.items():
        for key, values in zip(keys, zip(*rows)):
            column = columns.get(key)
            if column is None:
                columns[key] = [positions, envs, list(values)]
            else:  # the key in entries with other keys too: merge them in entry order
                merged = sorted(
                    zip([*column[0], *positions], [*column[1], *envs], [*column[2], *values])
                )
                columns[key] = [list(c) for c in zip(*merged)]
    for key, (_, envs, values) in columns.items():
        nested = sum(map(isinstance, values, repeat(dict)))
        if key != "final_obs" and nested:
            if nested < len(values):  # a key both nested and not: Gymnasium's way, env by env
                for i, value in zip(envs, values):
                    infos = _add_one(infos, num_envs, key, value, i)
                continue
            array = vector_infos(infos.get(key, {}), num_envs, list(zip(envs, values)))
        else:
            array = infos.get(key)
            if array is None:
                array = (
                    np.full(num_envs, fill_value=None, dtype=object)
                    if key == "final_obs"
                    else _new_info_array(values[0], num_envs)
                )
            if array.dtype == object or array.ndim > 1:
                for i, value in zip(envs, values):
                    array[i] = value
            else:
                array[envs] = values
        mask = infos.get(f"_{key}")
        if mask is None:
            mask = np.zeros(num_envs, dtype=np.bool_)
        mask[envs] = True
        infos[key], infos[f"_{key}"] = array, mask
    return infos


def _add_one(infos: dict[str, Any], num_envs: int, key: str, value: Any, i: int) -> dict:
    return vector_infos(infos, num_envs, [(i, {key: value})])
