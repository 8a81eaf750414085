"""The tool-calling view: schemas, parsing, feedback text, penalties, batching."""

from __future__ import annotations

import json

import pytest

import labtwin
from labtwin.tools import (
    AnalysisTool,
    CallError,
    ChatLabEnv,
    ToolCall,
    format_tool_call,
    lab_tools,
    parse_tool_call,
)

RUN = {"temperature_K": 330, "time_min": 40, "feed_conc_mol_L": 0.2, "catalyst_mol_pct": 3}


def test_tools_follow_the_experiment_and_answer_models() -> None:
    tools = lab_tools(labtwin.load_task("BatchReactor-v1"))
    assert [t["function"]["name"] for t in tools] == ["propose_experiment"]
    params = tools[0]["function"]["parameters"]
    assert params["properties"]["catalyst_mol_pct"]["maximum"] == 5.0
    json.dumps(tools)  # serialisable for chat templates
    names = [t["function"]["name"] for t in lab_tools(labtwin.load_task("ArrheniusFit-v1"))]
    assert names == ["propose_experiment", "submit_answer"]


@pytest.mark.parametrize(
    "text, expected",
    [
        (format_tool_call("propose_experiment", RUN), ToolCall("propose_experiment", RUN)),
        (
            'Sure.\n<tool_call>\n{"name": "submit_answer", "arguments": {"x": 1}}\n</tool_call>',
            ToolCall("submit_answer", {"x": 1}),
        ),
        (
            '{"name": "propose_experiment", "arguments": "{\\"a\\": 2}"}',
            ToolCall("propose_experiment", {"a": 2}),
        ),
        # generation stopped before the closing tag
        (
            '<tool_call>{"name": "propose_experiment", "arguments": {"a": 1}}',
            ToolCall("propose_experiment", {"a": 1}),
        ),
        ("I would heat it.", CallError),
        ("<tool_call>{name: 1}</tool_call>", CallError),
        ('<tool_call>{"arguments": {}}</tool_call>', CallError),
        ('<tool_call>{"name": "x", "arguments": [1]}</tool_call>', CallError),
    ],
)
def test_parse_tool_call(text: str, expected) -> None:
    out = parse_tool_call(text)
    if expected is CallError:
        assert isinstance(out, CallError) and out.reason
    else:
        assert out == expected


def test_chat_campaign_feedback_penalties_and_end() -> None:
    env = ChatLabEnv(labtwin.load_task("BatchReactor-v1", budget=3), invalid_penalty=0.2)
    messages = env.reset([0, 1])
    assert messages[0][0]["role"] == "system" and "batch reactor" in messages[0][0]["content"]
    rewards = env.step([format_tool_call("propose_experiment", RUN), "no idea"])
    assert rewards[0] > 0 and rewards[1] == pytest.approx(-0.2)
    ok, bad = env.conversations[0].messages[-1], env.conversations[1].messages[-1]
    assert ok["role"] == "tool" and "yield_B" in ok["content"] and "±" in ok["content"]
    assert "no tool call found" in bad["content"] and "2 experiments left" in bad["content"]
    env.step(
        [
            format_tool_call("propose_experiment", {**RUN, "temperature_K": 999}),
            format_tool_call("propose_experiment", RUN),
        ]
    )
    assert "less than or equal to 380" in env.conversations[0].messages[-1]["content"]
    env.step([format_tool_call("propose_experiment", RUN)] * 2)
    assert env.live == [] and all(c.done for c in env.conversations)
    assert env.conversations[0].total_reward == pytest.approx(sum(env.conversations[0].rewards))


def test_answer_ends_only_its_own_conversation() -> None:
    env = ChatLabEnv(labtwin.load_task("ArrheniusFit-v1", noise=0.0))
    env.reset([3, 4])
    rewards = env.step(
        [
            format_tool_call("submit_answer", {"activation_energy_kJ_mol": 70.0}),
            format_tool_call("propose_experiment", {"temperature_K": 340, "time_min": 5}),
        ]
    )
    assert 0 < rewards[0] <= 1 and rewards[1] == 0.0
    assert env.live == [1]
    with pytest.raises(ValueError, match="expected 1 replies"):
        env.step(["a", "b"])


def test_same_seeds_same_conversations_and_batching_invariance() -> None:
    replies = [format_tool_call("propose_experiment", RUN)]
    one = ChatLabEnv(labtwin.load_task("BatchReactor-v1"))
    one.reset([7])
    one.step(replies)
    many = ChatLabEnv(labtwin.load_task("BatchReactor-v1"))
    many.reset([5, 7, 9])
    many.step(replies * 3)
    assert one.conversations[0].messages == many.conversations[1].messages


def test_analysis_tools_cost_no_budget() -> None:
    class ReactorWithMean(type(labtwin.load_task("BatchReactor-v1"))):
        def analysis_tools(self):
            def mean_yield(arguments, history):
                values = [m["yield_B"] for m in history if m.ok]
                return f"mean yield {sum(values) / len(values):.3f}" if values else "no data"

            return [
                AnalysisTool(
                    "mean_yield",
                    "Mean measured yield so far.",
                    {"type": "object", "properties": {}},
                    mean_yield,
                )
            ]

    env = ChatLabEnv(ReactorWithMean(budget=2))
    env.reset([0])
    env.step([format_tool_call("propose_experiment", RUN)])
    env.step([format_tool_call("mean_yield", {})])
    assert env.conversations[0].messages[-1]["content"].startswith("mean yield")
    assert env.conversations[0].campaign.remaining == 1
