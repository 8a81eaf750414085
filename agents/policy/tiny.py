"""A tiny chat model built locally, for CPU tests and demos.

Nothing is downloaded. The tokenizer is a byte-level BPE trained in-process on
a small built-in corpus (tool-call JSON, lab-protocol and chemistry words), so
any text round-trips exactly; it is wrapped as a ``transformers`` fast
tokenizer with a ChatML chat template that renders system, user, assistant
and tool messages, tool calls and OpenAI-style tool definitions. The model is
a two-layer Qwen2 causal LM initialised from a fixed seed. ``save_tiny`` writes
both to a folder that ``AutoTokenizer`` / ``AutoModelForCausalLM`` (and so
``HFPolicy.from_pretrained``) load like any other local model path.

    >>> path = save_tiny("/tmp/tiny-chat")  # doctest: +SKIP
    >>> policy = HFPolicy.from_pretrained(path)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
from tokenizers import (
    AddedToken,
    Regex,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    trainers,
)
from transformers import AutoModelForCausalLM, PreTrainedModel, PreTrainedTokenizerFast, Qwen2Config

from labtwin.agents.policy.hf import save_pretrained

PAD_TOKEN = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = [PAD_TOKEN, IM_START, IM_END]
# Added as whole tokens but not "special": decoding with skip_special_tokens keeps them.
TOOL_CALL_TOKENS = ["<tool_call>", "</tool_call>"]
VOCAB_SIZE = 512
QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# ChatML with Hermes-style tool calls (the layout Qwen2.5 models use), so a
# rollout that parses <tool_call> blocks works for the tiny model and real ones.
# Assistant turns sit in {% generation %} blocks, so
# apply_chat_template(..., return_assistant_tokens_mask=True) can mask them.
CHAT_TEMPLATE = r"""
{%- macro render_content(content) -%}
    {%- if content is string -%}{{- content -}}{%- else -%}{{- content | tojson -}}{%- endif -%}
{%- endmacro -%}
{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0].role == 'system' %}
        {{- render_content(messages[0].content) + '\n\n' }}
    {%- endif %}
    {{- '# Tools\n\nYou may call one or more functions. Function signatures are within <tools></tools>:\n<tools>' }}
    {%- for tool in tools %}
        {{- '\n' + (tool | tojson) }}
    {%- endfor %}
    {{- '\n</tools>\n\nFor each call, return a JSON object with the function name and arguments within <tool_call></tool_call> tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n' }}
{%- elif messages[0].role == 'system' %}
    {{- '<|im_start|>system\n' + render_content(messages[0].content) + '<|im_end|>\n' }}
{%- endif %}
{%- for message in messages %}
    {%- if message.role == 'system' %}
        {%- if not loop.first %}
            {{- '<|im_start|>system\n' + render_content(message.content) + '<|im_end|>\n' }}
        {%- endif %}
    {%- elif message.role == 'assistant' %}
        {{- '<|im_start|>assistant\n' }}
        {%- generation %}
            {%- if message.content %}
                {{- render_content(message.content) }}
            {%- endif %}
            {%- if message.tool_calls %}
                {%- for tool_call in message.tool_calls %}
                    {%- set call = tool_call.function if tool_call.function is defined else tool_call %}
                    {%- if message.content or not loop.first %}
                        {{- '\n' }}
                    {%- endif %}
                    {{- '<tool_call>\n{"name": ' + (call.name | tojson) + ', "arguments": ' }}
                    {%- if call.arguments is string %}
                        {{- call.arguments }}
                    {%- else %}
                        {{- call.arguments | tojson }}
                    {%- endif %}
                    {{- '}\n</tool_call>' }}
                {%- endfor %}
            {%- endif %}
            {{- '<|im_end|>' }}
        {%- endgeneration %}
        {{- '\n' }}
    {%- else %}
        {{- '<|im_start|>' + message.role + '\n' + render_content(message.content) + '<|im_end|>\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
"""

_WORDS = """
experiment measurement temperature pressure concentration catalyst yield selectivity
conversion reactor batch flow rate residence time kelvin celsius pascal bar molar
mol litre second minute hour energy enthalpy entropy activation arrhenius rate constant
equilibrium solvent reagent product reactant kinetics diffusion viscosity density
lattice constant crystal structure relaxation equation of state bulk modulus phase
stability molecule conformer smiles bond angle torsion force field dynamics langevin
thermostat timestep trajectory observable uncertainty budget campaign submit answer
invalid failed ok status cost reward propose run_experiment submit_answer measure
hydrogen carbon nitrogen oxygen water ethanol methanol benzene acetone toluene
CCO c1ccccc1 CC(=O)O O=C=O [H][H] N#N
"""

_TOOL_CALLS = [
    '{"name": "run_experiment", "arguments": {"temperature_K": 350.0, "pressure_bar": 2.5}}',
    '{"name": "run_experiment", "arguments": {"concentration_mol_per_L": 0.125, "time_s": 600}}',
    '{"name": "run_experiment", "arguments": {"catalyst": "Pd", "smiles": "CCO", "steps": 3}}',
    '{"name": "submit_answer", "arguments": {"activation_energy_kJ_per_mol": 52.3}}',
    '{"status": "ok", "observables": {"yield": 0.731, "conversion": 0.92}, "cost": 1.0}',
    '{"status": "invalid", "reason": "temperature_K must be <= 600.0", "cost": 0.0}',
    '{"type": "function", "function": {"name": "run_experiment", "description": "Run one '
    'experiment", "parameters": {"type": "object", "properties": {"temperature_K": '
    '{"type": "number", "minimum": 250, "maximum": 600}}, "required": ["temperature_K"]}}}',
]


def tiny_corpus() -> list[str]:
    """The built-in training text of the tiny tokenizer (deterministic)."""
    chat = (
        "<|im_start|>system\n# Tools\n\nYou may call one or more functions. Function "
        "signatures are within <tools></tools>:\n<tools>\n</tools>\n\nFor each call, return "
        "a JSON object with the function name and arguments within <tool_call></tool_call> "
        "tags:\n<|im_end|>\n<|im_start|>user\nFind the temperature with the highest yield."
        "<|im_end|>\n<|im_start|>assistant\n<tool_call>\n</tool_call><|im_end|>\n"
        "<|im_start|>tool\n<|im_end|>\n"
    )
    numbers = " ".join(f"{x / 8:.3f} {x * 25} {x}e-3" for x in range(64))
    return [chat] * 8 + _TOOL_CALLS * 8 + [_WORDS] * 4 + [numbers]


def build_tiny_tokenizer(
    vocab_size: int = VOCAB_SIZE, extra_texts: Sequence[str] = ()
) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE on :func:`tiny_corpus` and wrap it for ``transformers``.

    ``extra_texts`` (for example a lab's brief and tool schemas) join the
    corpus, so that the texts a model will see take fewer tokens.

    Byte-level: every string (JSON, SMILES, unicode) encodes and decodes back
    exactly. ``<|im_end|>`` is the end-of-turn/EOS token, ``<|endoftext|>``
    pads. Takes a few tens of milliseconds.
    """
    tokenizer = Tokenizer(models.BPE())
    # Qwen2's normaliser and pre-tokeniser: a saved tiny model reloads through
    # AutoTokenizer as a Qwen2 tokenizer, which imposes them; identical ids either way
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(tiny_corpus() + list(extra_texts) * 4, trainer=trainer)
    tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in TOOL_CALL_TOKENS])
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token=IM_END,
        pad_token=PAD_TOKEN,
        chat_template=CHAT_TEMPLATE,
        clean_up_tokenization_spaces=False,
        padding_side="left",
        model_max_length=4096,
    )


def build_tiny_model(
    tokenizer: PreTrainedTokenizerFast, seed: int = 0, **config_overrides
) -> PreTrainedModel:
    """A small Qwen2 causal LM (about 0.1 M parameters) with seeded random weights.

    Defaults: 2 layers, hidden size 64, 4 attention heads (2 key/value heads),
    tied input/output embeddings, vocabulary ``len(tokenizer)``. Any
    ``Qwen2Config`` field can be overridden (``hidden_size=128``, ...). The
    global torch RNG is left untouched. Generation stops at ``<|im_end|>`` or
    ``<|endoftext|>``.
    """
    stop_ids = [tokenizer.convert_tokens_to_ids(t) for t in (IM_END, PAD_TOKEN)]
    config_kwargs = dict(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=stop_ids,
        pad_token_id=tokenizer.pad_token_id,
    )
    config_kwargs.update(config_overrides)
    config = Qwen2Config(**config_kwargs)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config)
    model.generation_config.eos_token_id = stop_ids
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def save_tiny(path: str | Path, seed: int = 0, **config_overrides) -> Path:
    """Build the tiny tokenizer and model and save both under ``path``.

    Load them back with ``AutoTokenizer.from_pretrained(path)`` and
    ``AutoModelForCausalLM.from_pretrained(path)``, or ``HFPolicy.from_pretrained``.
    """
    path = Path(path)
    tokenizer = build_tiny_tokenizer()
    model = build_tiny_model(tokenizer, seed=seed, **config_overrides)
    return save_pretrained(path, model, tokenizer)
