"""The tool-calling view of a lab: multi-turn chat campaigns for LLM agents.

A conversation starts with the lab's brief as system text and the budget as
the first user turn. The model answers with one tool call per turn, in the
Hermes/Qwen form most chat templates use::

    <tool_call>{"name": "propose_experiment", "arguments": {"temperature_K": 330, ...}}</tool_call>

(a bare JSON object ``{"name": ..., "arguments": ...}`` is accepted too). Tools:

- ``propose_experiment`` — parameters are the lab's experiment JSON schema;
- ``submit_answer`` — where the lab takes a final answer;
- the lab's analysis tools (:meth:`labtwin.Task.analysis_tools`), which
  compute from the campaign's measurements and cost no budget.

Every reply costs one experiment slot, except an analysis call; a reply
without a parsable call, an unknown tool or invalid arguments is recorded as
an ``invalid`` measurement whose reason is sent back as the tool result, so
the model can learn from it, and ``invalid_penalty`` is subtracted. Nothing a
model writes can crash a rollout.

:class:`ChatLabEnv` holds a batch of conversations and steps all live ones
with one simulator call.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from labtwin.campaign import Campaign, Record, step_campaigns
from labtwin.experiment import Invalid, tool_schema
from labtwin.task import AnalysisTool, Task

__all__ = ["AnalysisTool", "ChatLabEnv", "lab_tools", "parse_tool_call", "format_tool_call"]

PROPOSE = "propose_experiment"
SUBMIT = "submit_answer"
_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)


def lab_tools(task: Task) -> list[dict[str, Any]]:
    """OpenAI-style tool definitions for a lab."""
    tools = [
        _function(
            PROPOSE,
            "Run one experiment in the lab and get its measurement.",
            tool_schema(task.experiment_model),
        )
    ]
    if task.answer_model is not None:
        schema = task.answer_model.model_json_schema()
        schema.pop("title", None)
        tools.append(_function(SUBMIT, "Submit the final answer; this ends the campaign.", schema))
    for tool in task.analysis_tools():
        tools.append(_function(tool.name, tool.description, tool.parameters))
    return tools


def _function(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class CallError:
    reason: str


def parse_tool_call(text: str) -> ToolCall | CallError:
    """The first tool call in a model's reply, or why there is none.

    >>> parse_tool_call('<tool_call>{"name": "propose_experiment", "arguments": {"x": 1}}</tool_call>')
    ToolCall(name='propose_experiment', arguments={'x': 1})
    >>> parse_tool_call("I think 330 K is best").reason
    'no tool call found: reply with <tool_call>{"name": ..., "arguments": {...}}</tool_call>'
    """
    match = _CALL.search(text)
    body = match.group(1) if match else text.strip()
    if not match and not body.startswith("{"):
        return CallError(
            'no tool call found: reply with <tool_call>{"name": ..., '
            '"arguments": {...}}</tool_call>'
        )
    try:
        call = json.loads(body)
    except json.JSONDecodeError as err:
        return CallError(f"tool call is not valid JSON: {err.msg} at column {err.colno}")
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        return CallError('a tool call must be a JSON object with a "name" and "arguments"')
    arguments = call.get("arguments", {})
    if isinstance(arguments, str):  # some templates serialise arguments as a string
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as err:
            return CallError(f"tool arguments are not valid JSON: {err.msg}")
    if not isinstance(arguments, dict):
        return CallError('"arguments" must be a JSON object')
    return ToolCall(call["name"], arguments)


def format_tool_call(name: str, arguments: dict[str, Any]) -> str:
    """The text a model should emit for a call (used for warm-start data)."""
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def describe_record(record: Record, campaign: Campaign) -> str:
    """The tool result text for one step: values with units and error bars."""
    m = record.measurement
    n_left = campaign.remaining
    left = f"{n_left} experiment{'' if n_left == 1 else 's'}"
    if record.kind == "answer":
        if m.ok:
            return f"Answer accepted. Score {record.score:.3f}. The campaign is over."
        return f"Error: {m.reason}. The answer was not accepted. {left} left."
    n = len(campaign.history)
    if m.status == "invalid":
        return f"Error: {m.reason}. The experiment was not run. {left} left."
    if m.status == "failed":
        return f"Experiment {n} failed: {m.reason}. {left} left."
    return (
        f"Experiment {n}: {m.describe()}. Score {record.score:.4g}; best so far "
        f"{campaign.best_score:.4g}. {left} left."
    )


@dataclass
class Conversation:
    """One campaign as chat messages (OpenAI format)."""

    campaign: Campaign
    messages: list[dict[str, Any]] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return self.campaign.done

    @property
    def total_reward(self) -> float:
        return float(sum(self.rewards))


class ChatLabEnv:
    """A batch of tool-calling campaigns of one lab, stepped together.

    ``reset(seeds)`` starts one conversation per seed; ``step(replies)`` takes
    one assistant reply per *live* conversation (in order), appends it and
    the tool result to the conversation, and returns the per-reply rewards.
    """

    def __init__(
        self, task: Task, invalid_penalty: float = 0.1, reward_mode: str = "improvement"
    ) -> None:
        self.task = task
        self.invalid_penalty = invalid_penalty
        self.reward_mode = reward_mode
        self.tools = lab_tools(task)
        self._analysis = {t.name: t for t in task.analysis_tools()}
        self.conversations: list[Conversation] = []

    def system_prompt(self) -> str:
        names = ", ".join(t["function"]["name"] for t in self.tools)
        return (
            f"{self.task.brief.strip()}\n\nYou have {self.task.budget} experiments. "
            f"Each turn, call exactly one tool ({names}) as "
            '<tool_call>{"name": ..., "arguments": {...}}</tool_call>.'
        )

    def reset(self, seeds: list[int]) -> list[list[dict[str, Any]]]:
        self.conversations = []
        for seed in seeds:
            campaign = Campaign.start(self.task, np.random.default_rng(seed))
            known = self.task.describe_conditions(campaign.conditions)
            first = f"The campaign starts. Budget: {self.task.budget} experiments."
            messages = [
                {"role": "system", "content": self.system_prompt()},
                {"role": "user", "content": f"{first} {known}".strip()},
            ]
            self.conversations.append(Conversation(campaign, messages))
        return [c.messages for c in self.conversations]

    @property
    def live(self) -> list[int]:
        return [i for i, c in enumerate(self.conversations) if not c.done]

    def step(self, replies: list[str]) -> list[float]:
        """Apply one reply per live conversation; returns their rewards."""
        live = self.live
        if len(replies) != len(live):
            raise ValueError(
                f"expected {len(live)} replies (live conversations), got {len(replies)}"
            )
        calls = [parse_tool_call(r) for r in replies]
        rewards = [0.0] * len(live)
        budgeted = []  # positions in `live` whose reply spends an experiment
        for k, (i, call) in enumerate(zip(live, calls)):
            if isinstance(call, ToolCall) and call.name in self._analysis:
                conversation = self.conversations[i]
                self._append(conversation, replies[k], call, self._run_analysis(conversation, call))
            else:
                budgeted.append(k)
        records = step_campaigns(
            [self.conversations[live[k]].campaign for k in budgeted],
            [self._proposal(calls[k], replies[k]) for k in budgeted],
            self.reward_mode,  # type: ignore[arg-type]
            self.invalid_penalty,
        )
        for k, record in zip(budgeted, records):
            conversation = self.conversations[live[k]]
            text = describe_record(record, conversation.campaign)
            self._append(conversation, replies[k], calls[k], text)
            rewards[k] = record.reward
        for i, reward in zip(live, rewards):
            self.conversations[i].rewards.append(reward)
        return rewards

    def _proposal(self, call: ToolCall | CallError, reply: str) -> Any:
        """What goes to the campaign: an experiment, an answer, or something that will be invalid."""
        if isinstance(call, CallError):
            return Invalid(call.reason, reply)
        if call.name == PROPOSE:
            return call.arguments
        if call.name == SUBMIT:
            return {"answer": call.arguments}
        known = ", ".join(t["function"]["name"] for t in self.tools)
        return Invalid(f"unknown tool {call.name!r}; the tools are {known}", reply)

    def _run_analysis(self, conversation: Conversation, call: ToolCall) -> str:
        tool = self._analysis[call.name]
        history = [r.measurement for r in conversation.campaign.history]
        try:
            return tool.run(call.arguments, history)
        except (ValueError, TypeError, KeyError) as err:
            return f"Error: {call.name} could not run: {err}"

    @staticmethod
    def _append(
        conversation: Conversation, reply: str, call: ToolCall | CallError, result: str
    ) -> None:
        # OpenAI convention: the call goes in tool_calls and the rest of the reply in
        # content, so that a chat template renders the turn once
        message: dict[str, Any] = {"role": "assistant", "content": reply}
        name = call.name if isinstance(call, ToolCall) else "none"
        if isinstance(call, ToolCall):
            message["content"] = _CALL.sub("", reply).strip()
            message["tool_calls"] = [
                {"type": "function", "function": {"name": call.name, "arguments": call.arguments}}
            ]
        conversation.messages += [message, {"role": "tool", "name": name, "content": result}]
