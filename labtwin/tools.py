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
the model can learn from it, and ``invalid_penalty`` is subtracted. Every
reply, analysis calls included, is a turn; a campaign ends after the lab's
``max_turns`` turns with a message that says so. Nothing a model writes can
crash a rollout.

:class:`ChatLabEnv` holds a batch of conversations and steps all live ones
with one simulator call.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from labtwin.campaign import Campaign, CampaignBatch, Record, RewardMode
from labtwin.experiment import Analysis, Answer, Invalid, tool_schema
from labtwin.task import AnalysisTool, Task

__all__ = [
    "AnalysisTool",
    "ChatLabEnv",
    "format_tool_call",
    "lab_tools",
    "parse_tool_call",
    "proposal_from_call",
]

PROPOSE = "propose_experiment"
SUBMIT = "submit_answer"
OPEN, CLOSE = "<tool_call>", "</tool_call>"


def _call_span(text: str) -> tuple[int, int, str] | None:
    """Start, end and body of the first ``<tool_call>...</tool_call>`` (linear time)."""
    start = text.find(OPEN)
    if start < 0:
        return None
    body_start = start + len(OPEN)
    close = text.find(CLOSE, body_start)
    end = len(text) if close < 0 else close + len(CLOSE)
    body = text[body_start : len(text) if close < 0 else close]
    return start, end, body.strip()


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
    span = _call_span(text)
    body = span[2] if span else text.strip()
    if not span and not body.startswith("{"):
        return CallError(
            'no tool call found: reply with <tool_call>{"name": ..., '
            '"arguments": {...}}</tool_call>'
        )
    try:
        call = json.loads(body)
    except json.JSONDecodeError as err:
        return CallError(f"tool call is not valid JSON: {err.msg} at column {err.colno}")
    except (ValueError, RecursionError) as err:  # 5000-digit integers, deep nesting
        return CallError(f"tool call JSON could not be read: {str(err)[:120]}")
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        return CallError('a tool call must be a JSON object with a "name" and "arguments"')
    arguments = call.get("arguments", {})
    if isinstance(arguments, str):  # some templates serialise arguments as a string
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as err:
            return CallError(f"tool arguments are not valid JSON: {err.msg}")
        except (ValueError, RecursionError) as err:
            return CallError(f"tool arguments could not be read: {str(err)[:120]}")
    if not isinstance(arguments, dict):
        return CallError('"arguments" must be a JSON object')
    return ToolCall(call["name"], arguments)


def format_tool_call(name: str, arguments: dict[str, Any]) -> str:
    """The text a model should emit for a call (used for warm-start data)."""
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def proposal_from_call(task: Task, call: ToolCall | CallError, reply: Any = None) -> Any:
    """What a tool call proposes to the campaign engine (one mapping for every consumer).

    ``propose_experiment`` gives its arguments (the experiment), ``submit_answer``
    an :class:`~labtwin.experiment.Answer`, a lab's analysis tool an
    :class:`~labtwin.experiment.Analysis`; no call or an unknown tool an
    :class:`~labtwin.experiment.Invalid` that says why.
    """
    if isinstance(call, CallError):
        return Invalid(call.reason, reply)
    if call.name == PROPOSE:
        return call.arguments
    if call.name == SUBMIT and task.answer_model is not None:
        return Answer(call.arguments)
    analysis = [t.name for t in task.analysis_tools()]
    if call.name in analysis:
        return Analysis(call.name, call.arguments)
    known = ", ".join(t["function"]["name"] for t in lab_tools(task))
    return Invalid(f"unknown tool {call.name!r}; the tools are {known}", reply)


def budget_text(task: Task) -> str:
    """``"12 experiments"``, and the cost budget where the task has one."""
    text = f"{task.budget} experiments"
    if task.cost_budget is not None:
        text += f" and {task.cost_budget:g} {task.cost_unit} of cost (whichever runs out first)"
    return text


def describe_record(record: Record, campaign: Campaign) -> str:
    """The tool result text for one step: values with units and error bars."""
    m = record.measurement
    n_left = campaign.remaining
    left = f"{n_left} experiment{'' if n_left == 1 else 's'} left"
    if campaign.cost_left is not None:
        left += (
            f" and {max(campaign.cost_left, 0.0):.3g} {campaign.task.cost_unit} of the cost budget"
        )
    if campaign.done and campaign.end_reason.startswith(("turn cap", "cost budget")):
        left = f"The campaign is over: {campaign.end_reason}"
    if record.kind == "analysis":
        text = record.note if m.ok else f"Error: {m.reason}"
        return f"{text} {left}."
    if record.kind == "answer":
        if m.ok:
            return f"Answer accepted. Score {record.score:.3f}. The campaign is over."
        return f"Error: {m.reason}. The answer was not accepted. {left}."
    n = campaign.experiments
    if m.status == "invalid":
        return f"Error: {m.reason}. The experiment was not run. {left}."
    if m.status == "failed":
        return f"Experiment {n} failed: {m.reason}. {left}."
    text = (
        f"Experiment {n}: {m.describe()}. Score {record.score:.4g}; best so far "
        f"{campaign.best_score:.4g}. {left}."
    )
    return text + confirmation_text(record)


def confirmation_text(record: Record) -> str:
    """What the closing confirmation measured (empty where there was none)."""
    if record.confirmed_score is None:
        return ""
    c = record.confirmation
    shown = c.describe() if c.ok else f"{c.status}: {c.reason}"
    return (
        f" The campaign is over. The lab measured the best experiment once more: {shown}; "
        f"score {record.confirmed_score:.4g}."
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
    Campaigns run on a :class:`~labtwin.campaign.CampaignBatch` (one slot per
    conversation), so every reply's experiment goes to one simulator call.
    """

    def __init__(
        self,
        task: Task,
        invalid_penalty: float = 0.1,
        reward_mode: RewardMode = "improvement",
        max_turns: int | None = None,
        recorder: Any = None,
        first_campaign_id: int = 0,
        batch_factory: Any = CampaignBatch,
    ) -> None:
        self.task = task
        self.batch_factory = batch_factory  # CampaignBatch's signature (Ray: labtwin.distributed)
        self.invalid_penalty = invalid_penalty
        self.reward_mode = reward_mode
        self.max_turns = max_turns
        self.recorder = recorder
        self.first_campaign_id = first_campaign_id
        self.tools = lab_tools(task)
        self.batch: CampaignBatch | None = None
        self.conversations: list[Conversation] = []

    def system_prompt(self) -> str:
        names = ", ".join(t["function"]["name"] for t in self.tools)
        return (
            f"{self.task.brief.strip()}\n\nYou have {budget_text(self.task)}. "
            f"Each turn, call exactly one tool ({names}) as "
            '<tool_call>{"name": ..., "arguments": {...}}</tool_call>.'
        )

    def reset(self, seeds: list[int]) -> list[list[dict[str, Any]]]:
        self.batch = self.batch_factory(
            self.task,
            max(len(seeds), 1),
            self.reward_mode,
            self.invalid_penalty,
            self.max_turns,
            recorder=self.recorder,
            first_campaign_id=self.first_campaign_id,
        )
        self.first_campaign_id += len(seeds)
        self.conversations = []
        for campaign in self.batch.reset(range(len(seeds)), seeds):
            known = self.task.describe_conditions(campaign.conditions)
            first = (
                f"The campaign starts. Budget: {budget_text(self.task)} "
                f"and at most {campaign.max_turns} tool calls."
            )
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
        proposals = [proposal_from_call(self.task, c, r) for c, r in zip(calls, replies)]
        records = self.batch.step(live, proposals)
        for i, reply, call, record in zip(live, replies, calls, records):
            conversation = self.conversations[i]
            self._append(conversation, reply, call, describe_record(record, conversation.campaign))
            conversation.rewards.append(record.reward)
        return [r.reward for r in records]

    @staticmethod
    def _append(
        conversation: Conversation, reply: str, call: ToolCall | CallError, result: str
    ) -> None:
        # OpenAI convention: the call goes in tool_calls and the rest of the reply in
        # content, so that a chat template renders the turn once
        message: dict[str, Any] = {"role": "assistant", "content": reply}
        name = call.name if isinstance(call, ToolCall) else "none"
        if isinstance(call, ToolCall):
            span = _call_span(reply)
            message["content"] = (reply[: span[0]] + reply[span[1] :]).strip() if span else ""
            message["tool_calls"] = [
                {"type": "function", "function": {"name": call.name, "arguments": call.arguments}}
            ]
        conversation.messages += [message, {"role": "tool", "name": name, "content": result}]
