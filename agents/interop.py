"""labtwin labs in other trainers: Stable-Baselines3 and TRL.

- :class:`SB3VecEnv` — a lab's campaigns as a Stable-Baselines3 ``VecEnv``
  whose ``step`` sends every campaign's experiment to the simulator in one
  batched call (needs ``stable-baselines3``).
- :func:`lab_reward_function` — a lab as a TRL-style reward function
  ``f(completions, **kwargs) -> list[float | None]``: each completion proposes
  one experiment as a tool call; all of them are measured in one batched call
  and scored by the lab (needs nothing beyond labtwin).
- :func:`lab_prompt` — the chat prompt such a completion answers.

See docs/interop.md.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode

import labtwin
from labtwin.campaign import CampaignBatch, RewardMode, derive_seeds
from labtwin.experiment import tool_schema
from labtwin.measurement import Measurement
from labtwin.task import Task
from labtwin.tools import PROPOSE, CallError, ToolCall, parse_tool_call, proposal_from_call
from labtwin.vector import VectorLabEnv

try:  # stable-baselines3 is optional: only SB3VecEnv needs it
    from stable_baselines3.common.vec_env import VecEnv as _VecEnvBase
except ImportError:  # pragma: no cover - exercised where SB3 is missing
    _VecEnvBase = object

__all__ = ["LabReward", "SB3VecEnv", "completion_text", "lab_prompt", "lab_reward_function"]


def _unbatch(infos: dict[str, Any], n: int) -> list[dict[str, Any]]:
    """Gymnasium's batched info dict as SB3's list of per-env dicts."""
    out: list[dict[str, Any]] = [{} for _ in range(n)]
    for key, values in infos.items():
        if key.startswith("_"):
            continue
        mask = infos.get(f"_{key}", np.ones(n, dtype=bool))
        for i in np.flatnonzero(mask):
            value = values[i]
            out[i][key] = value.item() if isinstance(value, np.generic) else value
    return out


def _task(task: Task | str, task_kwargs: dict[str, Any]) -> Task:
    if isinstance(task, Task):
        if task_kwargs:
            raise ValueError("task keyword arguments need a task id, not a Task object")
        return task
    return labtwin.load_task(task, **task_kwargs)


# ---- Stable-Baselines3 -----------------------------------------------------------------


class SB3VecEnv(_VecEnvBase):  # type: ignore[misc, valid-type]
    """Campaigns of one lab as a Stable-Baselines3 ``VecEnv``, one simulator call per step.

    A thin mapping over :class:`labtwin.VectorLabEnv` in Gymnasium's
    same-step autoreset mode, which is SB3's convention: a finished campaign is
    reset in the same step, the new campaign's first observation is returned,
    and the final one goes to ``infos[i]["terminal_observation"]`` (with
    ``infos[i]["TimeLimit.truncated"] = False``: a campaign ends by spending its
    budget, by an answer or at its turn cap, which are real terminations).
    Campaign ``i`` is seeded with ``seed + i`` (``env.seed(seed)`` before
    ``reset()``, as SB3 does), so both produce the same campaigns.

    Actions are ``(num_envs, d)`` arrays in ``[-1, 1]^d`` (the lab's numeric
    view); ``infos[i]`` also holds ``measurement``, ``status``, ``score``,
    ``best_score`` and ``experiments_done`` as in :class:`labtwin.LabEnv`.

        >>> venv = SB3VecEnv("BatchReactor-v1", num_envs=8, budget=5)  # doctest: +SKIP
        >>> model = stable_baselines3.PPO("MlpPolicy", VecMonitor(venv))  # doctest: +SKIP
    """

    def __init__(
        self,
        task: Task | str,
        num_envs: int,
        reward_mode: RewardMode = "improvement",
        invalid_penalty: float = 0.0,
        render_mode: str | None = None,
        **task_kwargs: Any,
    ) -> None:
        if _VecEnvBase is object:
            raise ImportError("SB3VecEnv needs stable-baselines3: pip install stable-baselines3")
        self.task = _task(task, task_kwargs)
        if self.task.numeric_view is None:
            raise ValueError(f"{self.task.id} has no numeric view; SB3 needs a Box action space")
        self.venv = VectorLabEnv(
            self.task,
            num_envs,
            render_mode=render_mode,
            reward_mode=reward_mode,
            invalid_penalty=invalid_penalty,
            autoreset_mode=AutoresetMode.SAME_STEP,
        )
        self.render_mode = render_mode
        self._actions: np.ndarray | None = None
        super().__init__(num_envs, self.venv.single_observation_space, self.task.action_space)

    @property
    def campaigns(self) -> list[Any]:
        return self.venv.campaigns

    def reset(self) -> np.ndarray:
        seeds = list(self._seeds)
        obs, infos = self.venv.reset(seed=seeds if any(s is not None for s in seeds) else None)
        self._reset_seeds()
        self._reset_options()
        self.reset_infos = _unbatch(infos, self.num_envs)
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        if self._actions is None:
            raise RuntimeError("call reset() and step_async() before step_wait()")
        obs, rewards, terminated, truncated, batched = self.venv.step(self._actions)
        self._actions = None
        infos = _unbatch(
            {k: v for k, v in batched.items() if not k.startswith("final")}, self.num_envs
        )
        dones = terminated | truncated
        for i in np.flatnonzero(dones):
            infos[i]["terminal_observation"] = batched["final_obs"][i]
            infos[i]["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
        return obs, rewards.astype(np.float32), dones, infos

    def close(self) -> None:
        pass

    def get_images(self) -> list[np.ndarray | None]:
        if self.render_mode != "rgb_array":
            return [None] * self.num_envs
        return list(self.venv.render())

    # The campaigns share one task and one set of settings, so per-env attributes are
    # this object's attributes.

    def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
        return [getattr(self, attr_name) for _ in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
        setattr(self, attr_name, value)

    def env_method(
        self, method_name: str, *method_args: Any, indices: Any = None, **method_kwargs: Any
    ) -> list[Any]:
        method = getattr(self, method_name)
        return [method(*method_args, **method_kwargs) for _ in self._get_indices(indices)]

    def env_is_wrapped(self, wrapper_class: type, indices: Any = None) -> list[bool]:
        return [False for _ in self._get_indices(indices)]


# ---- TRL reward functions ----------------------------------------------------------------


def lab_prompt(task: Task | str, **task_kwargs: Any) -> list[dict[str, str]]:
    """Chat messages asking for one experiment, answered by one ``propose_experiment`` call.

    The experiment's JSON schema is written into the system text (TRL's own
    ``tools=`` argument would make the trainer *execute* the call itself).
    """
    task = _task(task, task_kwargs)
    schema = json.dumps(tool_schema(task.experiment_model))
    system = (
        f"{task.brief.strip()}\n\nPropose one experiment. Reply with exactly one tool call, "
        f'<tool_call>{{"name": "{PROPOSE}", "arguments": {{...}}}}</tool_call>, whose '
        f"arguments follow this JSON schema: {schema}"
    )
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": "Propose the experiment with the best expected outcome."},
    ]


def completion_text(completion: str | Sequence[dict[str, Any]]) -> str | ToolCall:
    """What a completion says: its text, or its first tool call where TRL parsed one.

    TRL passes plain strings in standard mode and message lists in
    conversational mode (``[{"role": "assistant", "content": ...}]``, with
    ``tool_calls`` when the tokenizer has a response parser).

    >>> completion_text("<tool_call>{}</tool_call>")
    '<tool_call>{}</tool_call>'
    >>> completion_text([{"role": "assistant", "content": [{"type": "text", "text": "hi"}]}])
    'hi'
    >>> call = {"function": {"name": "propose_experiment", "arguments": '{"x": 1}'}}
    >>> completion_text([{"role": "assistant", "content": "", "tool_calls": [call]}])
    ToolCall(name='propose_experiment', arguments={'x': 1})
    """
    if isinstance(completion, str):
        return completion
    assistant = [m for m in completion if m.get("role", "assistant") == "assistant"]
    for message in assistant:
        for call in message.get("tool_calls") or []:
            function = call.get("function", call)
            arguments = function.get("arguments", {})
            if isinstance(arguments, str):  # JSON text; left as is when broken, so that
                try:  # the lab's validation says what is wrong with it
                    arguments = json.loads(arguments)
                except json.JSONDecodeError:
                    pass
            return ToolCall(str(function.get("name")), arguments)
    return "".join(_content_text(m.get("content")) for m in assistant[:1])


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


class LabReward:
    """A lab as a TRL reward function; see :func:`lab_reward_function`."""

    def __init__(
        self,
        task: Task,
        seed: int = 0,
        invalid_penalty: float | None = 0.1,
        conditions: dict[str, Any] | None = None,
    ) -> None:
        self.task = task
        self.seed = seed
        self.invalid_penalty = invalid_penalty
        self.conditions = task.nominal_conditions() if conditions is None else conditions
        self.calls = 0
        self.last_measurements: list[Measurement] = []
        self.__name__ = f"labtwin_{task.id}"  # TRL names reward columns after __name__

    def proposal(self, completion: str | Sequence[dict[str, Any]]) -> Any:
        """What a completion proposes: an experiment, or an :class:`~labtwin.Invalid` saying why not.

        Only ``propose_experiment`` applies here; answers and analysis calls are invalid.
        """
        said = completion_text(completion)
        call = said if isinstance(said, ToolCall) else parse_tool_call(said)
        if isinstance(call, ToolCall) and call.name != PROPOSE:
            call = CallError(f"unknown tool {call.name!r}; call {PROPOSE}")
        return proposal_from_call(self.task, call, said)

    def __call__(
        self, completions: Sequence[str | Sequence[dict[str, Any]]], **kwargs: Any
    ) -> list[float | None]:
        n = len(completions)
        if n == 0:
            return []
        batch = CampaignBatch(self.task, n, "score", self.invalid_penalty or 0.0)
        batch.reset(range(n), derive_seeds(self.seed, n, self.calls), [self.conditions] * n)
        records = batch.step(range(n), [self.proposal(c) for c in completions])
        self.calls += 1
        self.last_measurements = [r.measurement for r in records]
        if callable(kwargs.get("log_metric")):
            valid = np.mean([r.measurement.status != "invalid" for r in records])
            kwargs["log_metric"](f"{self.__name__}/valid_fraction", float(valid))
        return [
            None if self.invalid_penalty is None and r.measurement.status == "invalid" else r.reward
            for r in records
        ]


def lab_reward_function(
    task: Task | str,
    seed: int = 0,
    invalid_penalty: float | None = 0.1,
    conditions: dict[str, Any] | None = None,
    **task_kwargs: Any,
) -> LabReward:
    """A TRL reward function that runs each completion's proposed experiment in the lab.

    The returned callable ``f(completions, **kwargs) -> list[float | None]``
    takes completions as strings or as chat message lists (TRL's
    conversational mode), reads one ``propose_experiment`` tool call from each
    (:func:`labtwin.tools.parse_tool_call`, or the ``tool_calls`` TRL parsed),
    measures all of them with **one** batched simulator call (each completion
    is a one-experiment campaign of a :class:`~labtwin.campaign.CampaignBatch`,
    the engine behind every labtwin view), and returns the lab's score of each
    measurement (the reactor: its measured yield of B). Completion ``i`` of
    call ``k`` (from 0) is the campaign seeded ``derive_seeds(seed, n, k)[i]``,
    so every call gets fresh instrument noise, reproducibly. ``conditions``
    default to the nominal lab. Other keyword arguments (``prompts``, dataset columns,
    ``trainer_state``) are accepted and ignored, except TRL's ``log_metric``,
    which receives the share of valid proposals.

    A completion without a parsable call, with another tool, or whose
    experiment is invalid (out of range, unknown field) scores
    ``task.invalid_score - invalid_penalty``: the policy did something wrong
    and should learn that, as in labtwin's own GRPO trainer. With
    ``invalid_penalty=None`` it scores ``None`` instead, TRL's "this reward
    does not apply" (a NaN that the trainer skips), for when a separate format
    reward judges the form. A *failed* simulation is scored as the lab scores
    it (``invalid_score``), with no penalty: it is not the policy's fault.

    >>> reward = lab_reward_function("BatchReactor-v1", seed=0)
    >>> call = ('<tool_call>{"name": "propose_experiment", "arguments": {"temperature_K": 335, '
    ...         '"time_min": 40, "feed_conc_mol_L": 0.2, "catalyst_mol_pct": 4}}</tool_call>')
    >>> [round(r, 3) for r in reward([call, "I would heat it.", [{"role": "assistant", "content": call}]])]
    [0.836, -0.1, 0.909]
    >>> reward.last_measurements[1].reason[:18]
    'no tool call found'
    """
    return LabReward(_task(task, task_kwargs), seed, invalid_penalty, conditions)
