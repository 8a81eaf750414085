"""LLM policies: sample tool-calling completions and score them for training.

``hf`` wraps any local ``transformers`` causal LM (``HFPolicy``): batched chat
sampling with per-token log-probs, and the training forward pass. ``tiny``
builds a small tokenizer and model from configs, with no download, for CPU
tests and demos. Both need ``transformers`` and ``tokenizers``. ``grammar``
(imported on its own, needs ``xgrammar``) constrains tool calls to their JSON
schemas through ``HFPolicy.generate(logits_processor=...)``.
"""

from labtwin.agents.policy.hf import Completion, CompletionLogprobs, HFPolicy, default_device
from labtwin.agents.policy.tiny import build_tiny_model, build_tiny_tokenizer, save_tiny

__all__ = [
    "Completion",
    "CompletionLogprobs",
    "HFPolicy",
    "build_tiny_model",
    "build_tiny_tokenizer",
    "default_device",
    "save_tiny",
]
