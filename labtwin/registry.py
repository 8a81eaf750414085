"""The registry: every lab by id, as a task, an environment or a vector environment.

Labs are found through the ``labtwin.tasks`` entry-point group (the name is the
id without the ``labtwin/`` namespace, the value ``module:Class``), so other
packages can add labs, and through :func:`register_task` for classes defined
in a script or notebook. Each lab is registered with Gymnasium as
``labtwin/<Name>-v<N>``, with ``LabEnv`` as entry point and ``VectorLabEnv`` as
vector entry point; nothing is imported until a lab is made.
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import entry_points
from typing import Any

import gymnasium as gym

from labtwin.env import LabEnv
from labtwin.task import Task
from labtwin.vector import VectorLabEnv

NAMESPACE = "labtwin"
_ENV_KWARGS = (
    "render_mode",
    "reward_mode",
    "invalid_penalty",
    "max_turns",
    "action_view",
    "recorder",
)
_VEC_KWARGS = (*_ENV_KWARGS, "autoreset_mode")
_TASKS: dict[str, type[Task] | str] = {}


def short_id(task_id: str) -> str:
    return task_id.split("/", 1)[1] if task_id.startswith(f"{NAMESPACE}/") else task_id


def _register_gym(short_id: str) -> None:
    full = f"{NAMESPACE}/{short_id}"
    if full in gym.registry:
        del gym.registry[full]
    gym.register(
        id=full,
        entry_point=_make_env,
        vector_entry_point=_make_vec,
        kwargs={"task_id": short_id},
    )


def register_task(cls: type[Task]) -> type[Task]:
    """Class decorator that registers a lab under its ``id`` (e.g. ``"MyLab-v0"``)."""
    if not cls.id or "-v" not in cls.id:
        raise ValueError(f"{cls.__name__}.id must look like 'Name-v0', got {cls.id!r}")
    _TASKS[cls.id] = cls
    _register_gym(cls.id)
    return cls


def discover() -> None:
    """Register every lab advertised by installed packages (idempotent)."""
    for ep in entry_points(group="labtwin.tasks"):
        if ep.name not in _TASKS:
            _TASKS[ep.name] = ep.value
            _register_gym(ep.name)


def _task_class(task_id: str) -> type[Task]:
    short = short_id(task_id)
    if short not in _TASKS:
        discover()
    if short not in _TASKS:
        known = ", ".join(sorted(_TASKS)) or "none"
        raise KeyError(f"unknown lab {task_id!r}; registered labs: {known}")
    entry = _TASKS[short]
    if isinstance(entry, str):
        module, _, name = entry.partition(":")
        entry = getattr(import_module(module), name)
        if entry.id != short:
            raise RuntimeError(f"entry point {short!r} points at a class whose id is {entry.id!r}")
        _TASKS[short] = entry
    return entry


def list_tasks() -> list[str]:
    """Ids of all registered labs, e.g. ``["labtwin/BatchReactor-v1", ...]``."""
    discover()
    return sorted(f"{NAMESPACE}/{short}" for short in _TASKS)


def load_task(task_id: str, **task_kwargs: Any) -> Task:
    """The lab as a :class:`Task` object (for ``task.measure(...)``)."""
    return _task_class(task_id)(**task_kwargs)


def _split(
    kwargs: dict[str, Any], names: tuple[str, ...] = _ENV_KWARGS
) -> tuple[dict[str, Any], dict[str, Any]]:
    env_kw = {k: kwargs.pop(k) for k in names if k in kwargs}
    return env_kw, kwargs


def _make_env(task_id: str, **kwargs: Any) -> LabEnv:
    env_kw, task_kw = _split(dict(kwargs))
    return LabEnv(load_task(task_id, **task_kw), **env_kw)


def _make_vec(task_id: str, num_envs: int = 1, **kwargs: Any) -> VectorLabEnv:
    env_kw, task_kw = _split(dict(kwargs), _VEC_KWARGS)
    return VectorLabEnv(load_task(task_id, **task_kw), num_envs, **env_kw)


def make(task_id: str, **kwargs: Any) -> gym.Env:
    """``gymnasium.make`` for a lab; kwargs go to the env or to the task."""
    discover()
    return gym.make(f"{NAMESPACE}/{short_id(task_id)}", **kwargs)


def make_vec(task_id: str, num_envs: int, **kwargs: Any) -> VectorLabEnv:
    """A :class:`VectorLabEnv` of ``num_envs`` campaigns stepped in one simulator call."""
    return _make_vec(short_id(task_id), num_envs, **kwargs)
