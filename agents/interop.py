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

import gymnasium as gym
import numpy as np

import labtwin
from labtwin.campaign import Campaign, RewardMode, observation, observation_space, step_campaigns
from labtwin.env import step_info
from labtwin.experiment import Invalid, tool_schema
from labtwin.frames import campaign_frame
from labtwin.measurement import Measurement
from labtwin.task import Task
from labtwin.tools import PROPOSE, CallError, ToolCall, parse_tool_call

try:  # stable-baselines3 is optional: only SB3VecEnv needs it
    from stable_baselines3.common.vec_env import VecEnv as _VecEnvBase
except ImportError:  # pragma: no cover - exercised where SB3 is missing
    _VecEnvBase = object

__all__ = ["LabReward", "SB3VecEnv", "completion_text", "lab_prompt", "lab_reward_function"]


def _task(task: Task | str, task_kwargs: dict[str, Any]) -> Task:
    if isinstance(task, Task):
        if task_kwargs:
            raise ValueError("task keyword arguments need a task id, not a Task object")
        return task
    return labtwin.load_task(task, **task_kwargs)


# ---- Stable-Baselines3 -----------------------------------------------------------------


class SB3VecEnv(_VecEnvBase):  # type: ignore[misc, valid-type]
    """Campaigns of one lab as a Stable-Baselines3 ``VecEnv``, one simulator call per step.

    It is :class:`labtwin.VectorLabEnv` with SB3's conventions: both keep a
    list of :class:`~labtwin.Campaign` objects and advance them all with one
    :func:`~labtwin.campaign.step_campaigns` call, and both seed campaign ``i``
    with ``seed + i`` (``env.seed(seed)`` before ``reset()``, as SB3 does), so
    the two produce the same campaigns. What differs is autoreset: SB3 resets
    a finished campaign *in the same step*, returns the new campaign's first
    observation, and puts the final one in ``infos[i]["terminal_observation"]``
    (with ``infos[i]["TimeLimit.truncated"] = False``: a campaign ends by
    spending its budget or by an answer, which are real terminations), where
    Gymnasium's next-step autoreset spends an extra step on it.

    Actions are ``(num_envs, d)`` arrays in ``[-1, 1]^d`` (the lab's numeric
    view); ``infos[i]`` also holds ``measurement``, ``status``, ``score``,
    ``best_score`` and ``experiments_done`` as in :class:`labtwin.LabEnv`.

        >>> venv = SB3VecEnv("BatchReactor-v0", num_envs=8, budget=5)  # doctest: +SKIP
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
        if num_envs < 1:
            raise ValueError(f"num_envs must be at least 1, got {num_envs}")
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        self.task = _task(task, task_kwargs)
        self.reward_mode = reward_mode
        self.invalid_penalty = invalid_penalty
        self.render_mode = render_mode
        self.campaigns: list[Campaign | None] = [None] * num_envs
        self._rngs = [np.random.default_rng() for _ in range(num_envs)]
        self._actions: np.ndarray | None = None
        super().__init__(num_envs, observation_space(self.task), self.task.numeric_view.space)

    def reset(self) -> np.ndarray:
        for i, seed in enumerate(self._seeds):
            if seed is not None:
                self._rngs[i], _ = gym.utils.seeding.np_random(seed)
            self.campaigns[i] = Campaign.start(self.task, self._rngs[i])
        self._reset_seeds()
        self._reset_options()
        self.reset_infos = [{"experiments_done": 0} for _ in range(self.num_envs)]
        return np.stack([observation(c) for c in self.campaigns])

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        if self._actions is None or any(c is None for c in self.campaigns):
            raise RuntimeError("call reset() and step_async() before step_wait()")
        campaigns: list[Campaign] = self.campaigns  # type: ignore[assignment]
        records = step_campaigns(
            campaigns, list(self._actions), self.reward_mode, self.invalid_penalty
        )
        self._actions = None
        rewards = np.array([r.reward for r in records], dtype=np.float32)
        dones = np.array([c.done for c in campaigns], dtype=bool)
        infos = [step_info(c, r) for c, r in zip(campaigns, records)]
        obs = np.stack([observation(c) for c in campaigns])
        for i in np.flatnonzero(dones):
            infos[i]["terminal_observation"] = obs[i].copy()
            infos[i]["TimeLimit.truncated"] = False
            self.campaigns[i] = Campaign.start(self.task, self._rngs[i])
            obs[i] = observation(self.campaigns[i])
        return obs, rewards, dones, infos

    def close(self) -> None:
        pass

    def get_images(self) -> list[np.ndarray | None]:
        if self.render_mode != "rgb_array":
            return [None] * self.num_envs
        return [
            campaign_frame(
                f"{self.task.id} [{i}]",
                [(r.score, r.measurement.status) for r in c.history] if c else [],
                self.task.budget,
            )
            for i, c in enumerate(self.campaigns)
        ]

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
        """The experiment a completion proposes, or an :class:`~labtwin.Invalid` saying why not."""
        said = completion_text(completion)
        call = said if isinstance(said, ToolCall) else parse_tool_call(said)
        if isinstance(call, CallError):
            return Invalid(call.reason, said)
        if call.name != PROPOSE:
            return Invalid(f"unknown tool {call.name!r}; call {PROPOSE}", call.arguments)
        return call.arguments

    def __call__(
        self, completions: Sequence[str | Sequence[dict[str, Any]]], **kwargs: Any
    ) -> list[float | None]:
        proposals = [self.proposal(c) for c in completions]
        measurements = self.task.measure(
            proposals, seed=self.seed + self.calls, conditions=self.conditions
        )
        self.calls += 1
        self.last_measurements = measurements
        scores = [self._score(m) for m in measurements]
        if callable(kwargs.get("log_metric")) and measurements:
            valid = np.mean([m.status != "invalid" for m in measurements])
            kwargs["log_metric"](f"{self.__name__}/valid_fraction", float(valid))
        return scores

    def _score(self, m: Measurement) -> float | None:
        if m.status != "invalid":  # ok, or failed (scored like the environment does)
            return self.task.score(m, self.conditions)
        if self.invalid_penalty is None:
            return None
        return float(self.task.invalid_score) - self.invalid_penalty


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
    measures all of them with **one** batched ``task.measure`` call, and
    returns the lab's score of each measurement (the reactor: its measured
    yield of B). Call ``k`` (from 0) measures with ``seed + k``: the first
    call gives exactly ``task.measure(experiments, seed=seed)``, and later
    calls get fresh instrument noise, reproducibly. ``conditions`` default to
    the nominal lab. Other keyword arguments (``prompts``, dataset columns,
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

    >>> reward = lab_reward_function("BatchReactor-v0", seed=0)
    >>> call = ('<tool_call>{"name": "propose_experiment", "arguments": {"temperature_K": 335, '
    ...         '"time_min": 40, "feed_conc_mol_L": 0.2, "catalyst_mol_pct": 4}}</tool_call>')
    >>> [round(r, 3) for r in reward([call, "I would heat it.", [{"role": "assistant", "content": call}]])]
    [0.882, -0.1, 0.836]
    >>> reward.last_measurements[1].reason[:18]
    'no tool call found'
    """
    return LabReward(_task(task, task_kwargs), seed, invalid_penalty, conditions)
