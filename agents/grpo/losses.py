"""GRPO losses as plain torch functions.

Shapes: ``B`` completions (``G`` consecutive completions per prompt form a
group), ``T`` completion tokens (right-padded), ``V`` vocabulary entries.
``mask[b, t]`` is 1 for a token the policy generated and 0 for padding (and,
in multi-turn rollouts, for tokens the environment wrote).

The loss of one optimizer step is always a *sum* of per-token losses divided
by a *normaliser*; the three aggregations differ only in what they sum and in
the normaliser. Passing the normaliser of the whole optimizer step
(``loss_normaliser``, see :func:`loss_normaliser`) makes gradient accumulation
over micro-batches exact. docs/grpo.md has the formulas in one place.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch
from torch import Tensor

Aggregation = Literal["token_mean", "sequence_mean", "dr_grpo"]
AGGREGATIONS: tuple[str, ...] = ("token_mean", "sequence_mean", "dr_grpo")


def group_advantages(
    rewards: Tensor, group_size: int, scale_std: bool = True, eps: float = 1e-4
) -> Tensor:
    """Group-relative advantages.

    Rewards come in groups of ``group_size`` consecutive completions of the
    same prompt. With ``i`` one completion of group ``g``:

        A_i = r_i - mean_g(r)                       (scale_std=False, Dr. GRPO)
        A_i = (r_i - mean_g(r)) / (std_g(r) + eps)  (scale_std=True, GRPO)

    ``std_g`` is the sample standard deviation (Bessel's correction, n - 1),
    as in TRL. A group whose rewards are all equal gets advantages 0.

    Args:
        rewards: ``[B]`` scalar reward per completion, ``B = n_groups * group_size``.
        group_size: completions per prompt ``G``.
        scale_std: divide by the group's standard deviation.
        eps: added to the standard deviation before dividing.

    Returns:
        ``[B]`` advantages, same dtype as ``rewards``.
    """
    grouped = _grouped(rewards, group_size)
    centred = grouped - grouped.mean(dim=1, keepdim=True)
    if scale_std and group_size > 1:  # a group of one has advantage 0 and no std
        centred = centred / (grouped.std(dim=1, keepdim=True) + eps)
    return centred.reshape(-1)


def zero_variance_mask(rewards: Tensor, group_size: int) -> Tensor:
    """Mark completions whose group has zero reward variance.

    All completions of such a group get advantage 0, so they add no policy
    gradient (only KL, if any) while still counting in the loss normaliser.
    DAPO's "dynamic sampling" drops them: ``keep = ~zero_variance_mask(r, G)``.

    Args:
        rewards: ``[B]`` rewards, groups of ``group_size`` consecutive entries.
        group_size: completions per prompt ``G``.

    Returns:
        ``[B]`` bool, True for every completion of a group whose rewards are
        all equal (exactly; rewards are usually discrete or copied).
    """
    grouped = _grouped(rewards, group_size)
    all_equal = (grouped == grouped[:, :1]).all(dim=1, keepdim=True)
    return all_equal.expand_as(grouped).reshape(-1)


def kl_k3(logprobs: Tensor, ref_logprobs: Tensor) -> Tensor:
    """Per-token KL(pi || pi_ref) estimate, Schulman's k3 estimator.

        k3 = exp(ref - logp) - (ref - logp) - 1  >= 0

    Unbiased for KL(pi || pi_ref) when tokens are sampled from pi, and never
    negative. Shapes: ``[B, T]`` in, ``[B, T]`` out.
    """
    delta = ref_logprobs - logprobs
    return torch.exp(delta) - delta - 1.0


def grpo_loss(
    logprobs: Tensor,
    old_logprobs: Tensor | None,
    advantages: Tensor,
    mask: Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.28,
    ref_logprobs: Tensor | None = None,
    kl_coef: float = 0.0,
    aggregation: Aggregation = "token_mean",
    max_completion_length: int | None = None,
    loss_normaliser: float | Tensor | None = None,
    entropy: Tensor | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """Clipped GRPO surrogate with optional KL penalty.

    Per token, with ratio ``r = exp(logp - logp_old)`` and the completion's
    advantage ``A``:

        l = -min(r * A, clip(r, 1 - clip_low, 1 + clip_high) * A) + kl_coef * k3

    Separate ``clip_low``/``clip_high`` ("clip-higher", DAPO) let unlikely
    tokens with positive advantage grow further before clipping. The k3 term
    (:func:`kl_k3`) is added only when ``ref_logprobs`` is given and
    ``kl_coef != 0``.

    Aggregation over the batch (``m`` the mask, ``|o_b| = sum_t m[b, t]``):

    - ``"token_mean"`` (DAPO): ``sum_bt m*l / sum_bt m``.
    - ``"sequence_mean"`` (original GRPO): ``(1/B) sum_b (sum_t m*l / |o_b|)``.
    - ``"dr_grpo"`` (Dr. GRPO): ``sum_bt m*l / (B * max_completion_length)``.

    ``loss_normaliser`` replaces the denominator (``sum_bt m``, ``B`` and
    ``B * max_completion_length`` respectively). Give it the value for the
    whole optimizer step (:func:`loss_normaliser`) and *sum* the micro-batch
    losses: the accumulated gradient then equals the full-batch gradient for
    every aggregation.

    Args:
        logprobs: ``[B, T]`` log pi(token) under the current policy (with grad).
        old_logprobs: ``[B, T]`` log-probs at sampling time (no grad). None means
            on-policy: ``logprobs.detach()`` (ratio 1).
        advantages: ``[B]`` one advantage per completion.
        mask: ``[B, T]`` 1 for policy tokens, 0 for padding. Masked entries of
            the other tensors must be finite (0 is fine).
        clip_low: lower clip range, ratio floor ``1 - clip_low``.
        clip_high: upper clip range, ratio ceiling ``1 + clip_high``.
        ref_logprobs: ``[B, T]`` log-probs under a frozen reference policy.
        kl_coef: weight of the k3 KL penalty.
        aggregation: ``"token_mean"``, ``"sequence_mean"`` or ``"dr_grpo"``.
        max_completion_length: Dr. GRPO's constant; defaults to ``T``. Set it
            explicitly when micro-batches are padded to different ``T``.
        loss_normaliser: denominator for the whole optimizer step (see above).
        entropy: ``[B, T]`` per-token entropy, only reported in the metrics.

    Returns:
        ``(loss, metrics)``: scalar loss, and floats ``clip_fraction_low``
        (tokens with ``r < 1 - clip_low`` and ``A < 0``, where the gradient is
        cut), ``clip_fraction_high`` (``r > 1 + clip_high``, ``A > 0``),
        ``clip_fraction``, ``ratio_mean``, ``ratio_min``, ``ratio_max``,
        ``num_tokens``, and ``kl`` / ``entropy`` when given; means are over
        masked tokens.
    """
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {aggregation!r}")
    mask = mask.to(logprobs.dtype)
    old_logprobs = logprobs.detach() if old_logprobs is None else old_logprobs.detach()

    ratio = torch.exp(logprobs - old_logprobs)
    adv = advantages.detach().to(logprobs.dtype).unsqueeze(1)  # [B, 1]
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high) * adv
    per_token_loss = -torch.minimum(unclipped, clipped)

    kl = None
    if ref_logprobs is not None:
        kl = kl_k3(logprobs, ref_logprobs.detach())
        if kl_coef != 0.0:
            per_token_loss = per_token_loss + kl_coef * kl

    loss = _aggregate(per_token_loss, mask, aggregation, max_completion_length, loss_normaliser)

    with torch.no_grad():
        low = ((ratio < 1.0 - clip_low) & (adv < 0)).to(mask.dtype)
        high = ((ratio > 1.0 + clip_high) & (adv > 0)).to(mask.dtype)
        masked_ratio = ratio[mask.bool()]
        metrics = {
            "clip_fraction_low": _masked_mean(low, mask).item(),
            "clip_fraction_high": _masked_mean(high, mask).item(),
            "clip_fraction": _masked_mean(low + high, mask).item(),
            "ratio_mean": _masked_mean(ratio, mask).item(),
            "ratio_min": masked_ratio.min().item() if masked_ratio.numel() else 1.0,
            "ratio_max": masked_ratio.max().item() if masked_ratio.numel() else 1.0,
            "num_tokens": mask.sum().item(),
        }
        if kl is not None:
            metrics["kl"] = _masked_mean(kl, mask).item()
        if entropy is not None:
            metrics["entropy"] = _masked_mean(entropy, mask).item()
    return loss, metrics


def loss_normaliser(
    masks: Sequence[Tensor],
    aggregation: Aggregation,
    max_completion_length: int | None = None,
) -> float:
    """Denominator of one optimizer step's loss, over all its micro-batches.

    - ``"token_mean"``: total number of policy tokens, ``sum m``.
    - ``"sequence_mean"``: total number of completions.
    - ``"dr_grpo"``: total completions times ``max_completion_length``.

    Pass the result as ``grpo_loss(..., loss_normaliser=...)`` for every
    micro-batch and sum the losses (``loss.backward()`` per micro-batch). With
    DDP, which averages gradients over ``W`` ranks, compute it over all ranks'
    masks and pass ``normaliser / W``.

    Args:
        masks: the ``[B_i, T_i]`` masks of every micro-batch of the step.
        aggregation: as in :func:`grpo_loss`.
        max_completion_length: required for ``"dr_grpo"``.
    """
    if aggregation == "token_mean":
        return float(sum(m.sum().item() for m in masks))
    num_sequences = sum(m.shape[0] for m in masks)
    if aggregation == "sequence_mean":
        return float(num_sequences)
    if aggregation == "dr_grpo":
        if max_completion_length is None:
            raise ValueError("dr_grpo needs max_completion_length")
        return float(num_sequences * max_completion_length)
    raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {aggregation!r}")


def selective_log_softmax(logits: Tensor, token_ids: Tensor) -> Tensor:
    """``log_softmax(logits)[..., token_ids]`` without a full log-softmax copy.

    Works one leading row at a time: ``logit[id] - logsumexp(logits)``, so the
    peak extra memory is one row's ``[T, V]`` (in float32 for half-precision
    inputs, which are upcast for accuracy).

    Args:
        logits: ``[B, T, V]`` unnormalised scores.
        token_ids: ``[B, T]`` integer ids into the last dimension.

    Returns:
        log-probabilities shaped like ``token_ids``; float32 for half inputs,
        the logits' dtype otherwise.
    """
    rows = []
    for row_logits, row_ids in zip(logits, token_ids, strict=True):
        if row_logits.dtype in (torch.float16, torch.bfloat16):
            row_logits = row_logits.float()
        picked = row_logits.gather(-1, row_ids.unsqueeze(-1)).squeeze(-1)
        rows.append(picked - torch.logsumexp(row_logits, dim=-1))
    return torch.stack(rows)


def token_entropy(logits: Tensor, mask: Tensor | None = None) -> Tensor:
    """Entropy of the next-token distribution at every position.

        H = -sum_v p_v log p_v,   p = softmax(z)

    Logits of -inf (masked tokens) contribute 0. Computed one row at a time (float32 for half inputs) to bound memory.

    Args:
        logits: ``[B, T, V]``.
        mask: optional ``[B, T]``; positions where it is 0 get entropy 0.

    Returns:
        ``[B, T]`` entropies in nats.
    """
    rows = []
    for row_logits in logits:
        if row_logits.dtype in (torch.float16, torch.bfloat16):
            row_logits = row_logits.float()
        log_probs = torch.log_softmax(row_logits, dim=-1)
        # Tokens masked to -inf (e.g. by a grammar) have p = 0 and add 0, not nan.
        plogp = log_probs.exp() * log_probs.nan_to_num(neginf=0.0)
        rows.append(-plogp.sum(dim=-1))
    entropy = torch.stack(rows)
    if mask is not None:
        entropy = entropy * mask.to(entropy.dtype)
    return entropy


def _aggregate(
    per_token_loss: Tensor,
    mask: Tensor,
    aggregation: str,
    max_completion_length: int | None,
    normaliser: float | Tensor | None,
) -> Tensor:
    """Sum the masked per-token losses and divide by the normaliser."""
    masked = per_token_loss * mask
    if aggregation == "sequence_mean":
        total = (masked.sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)).sum()
        default = float(mask.shape[0])
    elif aggregation == "token_mean":
        total = masked.sum()
        default = mask.sum().clamp(min=1.0)
    else:  # dr_grpo
        total = masked.sum()
        default = float(mask.shape[0] * (max_completion_length or mask.shape[1]))
    return total / (default if normaliser is None else normaliser)


def _masked_mean(values: Tensor, mask: Tensor) -> Tensor:
    return (values * mask).sum() / mask.sum().clamp(min=1.0)


def _grouped(rewards: Tensor, group_size: int) -> Tensor:
    if rewards.ndim != 1 or rewards.numel() % group_size != 0:
        raise ValueError(
            f"rewards must be 1-D with a multiple of group_size={group_size} entries, "
            f"got shape {tuple(rewards.shape)}"
        )
    return rewards.view(-1, group_size)
