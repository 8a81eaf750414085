"""The tiny local tokenizer and model: round trips, chat template, save/load."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

import torch  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

from labtwin.agents.policy import build_tiny_model, build_tiny_tokenizer, save_tiny  # noqa: E402

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "run_experiment",
            "description": "Run one batch-reactor experiment.",
            "parameters": {
                "type": "object",
                "properties": {"temperature_K": {"type": "number"}},
                "required": ["temperature_K"],
            },
        },
    }
]


@pytest.fixture(scope="module")
def tokenizer():
    return build_tiny_tokenizer()


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "run_experiment", "arguments": {"temperature_K": 350.0, "smiles": "CC(=O)O"}}',
        "  leading and trailing spaces, tabs\tand\nnew lines  ",
        "unicode: café, Ångström, 10 µmol, ΔH = −52.3 kJ/mol, 🧪",
        "<tool_call>\n{}\n</tool_call><|im_end|>",
        "",
    ],
)
def test_tokenizer_round_trips_text(tokenizer, text):
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids) == text


def test_chat_and_tool_call_markers_are_single_tokens(tokenizer):
    for token in ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<tool_call>", "</tool_call>"]:
        assert len(tokenizer(token, add_special_tokens=False)["input_ids"]) == 1
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.pad_token == "<|endoftext|>"
    # <tool_call> is not special: decoding without special tokens keeps it.
    ids = tokenizer("<tool_call>{}</tool_call><|im_end|>", add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids, skip_special_tokens=True) == "<tool_call>{}</tool_call>"


def test_chat_template_renders_tools_calls_and_responses(tokenizer):
    messages = [
        {"role": "system", "content": "You run a lab."},
        {"role": "user", "content": "Maximise the yield."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "type": "function",
                    "function": {"name": "run_experiment", "arguments": {"temperature_K": 350.0}},
                }
            ],
        },
        {"role": "tool", "content": '{"status": "ok", "yield": 0.5}'},
    ]
    text = tokenizer.apply_chat_template(
        messages, tools=TOOLS, tokenize=False, add_generation_prompt=True
    )
    expected = (
        "<|im_start|>system\nYou run a lab.\n\n# Tools\n\nYou may call one or more functions. "
        "Function signatures are within <tools></tools>:\n<tools>\n"
        '{"type": "function", "function": {"name": "run_experiment", "description": '
        '"Run one batch-reactor experiment.", "parameters": {"type": "object", "properties": '
        '{"temperature_K": {"type": "number"}}, "required": ["temperature_K"]}}}\n</tools>\n\n'
        "For each call, return a JSON object with the function name and arguments within "
        "<tool_call></tool_call> tags:\n<tool_call>\n"
        '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\nMaximise the yield.<|im_end|>\n"
        "<|im_start|>assistant\n<tool_call>\n"
        '{"name": "run_experiment", "arguments": {"temperature_K": 350.0}}\n</tool_call>'
        "<|im_end|>\n"
        '<|im_start|>tool\n{"status": "ok", "yield": 0.5}<|im_end|>\n'
        "<|im_start|>assistant\n"
    )
    assert text == expected

    # Without tools or system message: plain ChatML.
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_chat_template_marks_assistant_tokens(tokenizer):
    messages = [
        {"role": "user", "content": "Go."},
        {"role": "assistant", "content": "Done."},
        {"role": "user", "content": "Again."},
        {"role": "assistant", "content": "Done again."},
    ]
    out = tokenizer.apply_chat_template(
        messages, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
    )
    assistant_ids = [i for i, m in zip(out["input_ids"], out["assistant_masks"], strict=True) if m]
    assert tokenizer.decode(assistant_ids) == "Done.<|im_end|>Done again.<|im_end|>"


def test_builds_are_deterministic(tokenizer):
    assert build_tiny_tokenizer().get_vocab() == tokenizer.get_vocab()
    first, again, other = (build_tiny_model(tokenizer, seed=s) for s in (0, 0, 1))
    for a, b in zip(first.parameters(), again.parameters(), strict=True):
        assert torch.equal(a, b)
    assert not torch.equal(first.model.embed_tokens.weight, other.model.embed_tokens.weight)
    assert build_tiny_model(tokenizer, hidden_size=32).config.hidden_size == 32


def test_save_and_load_with_auto_classes(tmp_path, tokenizer):
    path = save_tiny(tmp_path / "tiny", seed=3)
    loaded_tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    loaded_model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Find the best temperature."}],
        tools=TOOLS,
        tokenize=False,
        add_generation_prompt=True,
    )
    assert (
        loaded_tokenizer.apply_chat_template(
            [{"role": "user", "content": "Find the best temperature."}],
            tools=TOOLS,
            tokenize=False,
            add_generation_prompt=True,
        )
        == text
    )
    ids = tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
    assert loaded_tokenizer(text, add_special_tokens=False)["input_ids"] == ids[0].tolist()
    with torch.no_grad():
        expected = build_tiny_model(tokenizer, seed=3)(input_ids=ids).logits
        # Same weights, same float32 arithmetic: bitwise equal.
        assert torch.equal(loaded_model(input_ids=ids).logits, expected)
    assert loaded_model.generation_config.eos_token_id == [
        tokenizer.convert_tokens_to_ids("<|im_end|>"),
        tokenizer.pad_token_id,
    ]


def test_saving_and_loading_show_no_transformers_bars(tmp_path, capsys):
    """A training run shows its own progress: saving and loading a model through labtwin
    prints none of transformers' bars, and leaves them switched as the user had them."""
    from transformers.utils import logging as hf_logging

    from labtwin.agents.policy.hf import load_causal_lm

    assert hf_logging.is_progress_bar_enabled()
    path = save_tiny(tmp_path / "tiny", seed=3)
    load_causal_lm(path)
    captured = capsys.readouterr()
    assert "Writing model shards" not in captured.err + captured.out
    assert "%|" not in captured.err + captured.out  # no tqdm bar of any kind
    assert hf_logging.is_progress_bar_enabled()
