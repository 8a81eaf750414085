"""GRPO: group-relative advantages and the clipped token-level surrogate.

``losses`` holds plain torch functions (no trainer state): advantages per
group of completions, the clipped loss with its aggregation variants and an
optional k3 KL penalty, the normaliser that makes gradient accumulation exact,
and memory-light log-softmax / entropy helpers. See docs/grpo.md.
"""

from labtwin.agents.grpo.losses import (
    AGGREGATIONS,
    Aggregation,
    group_advantages,
    grpo_loss,
    kl_k3,
    loss_normaliser,
    selective_log_softmax,
    token_entropy,
    zero_variance_mask,
)

__all__ = [
    "AGGREGATIONS",
    "Aggregation",
    "group_advantages",
    "grpo_loss",
    "kl_k3",
    "loss_normaliser",
    "selective_log_softmax",
    "token_entropy",
    "zero_variance_mask",
]
