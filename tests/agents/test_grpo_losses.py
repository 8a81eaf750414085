"""GRPO loss functions against hand computations on small tensors.

Tensors are float64 and the expected numbers are worked out by hand in the
comments, so tolerances are float64 rounding (1e-12) unless stated.
"""

from __future__ import annotations

import math

import pytest
import torch

from labtwin.agents.grpo import (
    group_advantages,
    grpo_loss,
    kl_k3,
    selective_log_softmax,
    token_entropy,
    zero_variance_mask,
)

F64 = torch.float64
EXACT = dict(rtol=0, atol=1e-12)


def test_group_advantages_by_hand():
    rewards = torch.tensor([1.0, 2.0, 3.0, 5.0, 5.0, 5.0], dtype=F64)
    # Group 1: mean 2, sample std sqrt(((-1)^2 + 0 + 1^2) / 2) = 1. Group 2: all equal.
    eps = 1e-4
    expected = [-1 / (1 + eps), 0.0, 1 / (1 + eps), 0.0, 0.0, 0.0]
    torch.testing.assert_close(
        group_advantages(rewards, group_size=3, eps=eps), torch.tensor(expected, dtype=F64), **EXACT
    )
    # Dr. GRPO: only mean-centred.
    torch.testing.assert_close(
        group_advantages(rewards, group_size=3, scale_std=False),
        torch.tensor([-1.0, 0.0, 1.0, 0.0, 0.0, 0.0], dtype=F64),
        **EXACT,
    )
    # Group of two {0, 1}: mean 0.5, sample std sqrt(2 * 0.25 / 1) = 0.70710678...
    std = math.sqrt(0.5)
    torch.testing.assert_close(
        group_advantages(torch.tensor([0.0, 1.0], dtype=F64), group_size=2, eps=0.0),
        torch.tensor([-0.5 / std, 0.5 / std], dtype=F64),
        **EXACT,
    )


def test_group_advantages_rejects_ragged_groups():
    with pytest.raises(ValueError, match="group_size"):
        group_advantages(torch.zeros(5), group_size=2)


def test_zero_variance_groups_are_marked_and_dropped():
    rewards = torch.tensor([1.0, 0.0, 3.0, 3.0, 0.0, 0.0, 2.0, 1.0])
    drop = zero_variance_mask(rewards, group_size=2)
    assert drop.tolist() == [False, False, True, True, True, True, False, False]
    keep = ~drop
    advantages = group_advantages(rewards, group_size=2)
    # Dropped groups carry no signal; what is kept is still grouped consecutively.
    assert advantages[drop].abs().max() == 0
    assert rewards[keep].tolist() == [1.0, 0.0, 2.0, 1.0]
    assert (advantages[keep] != 0).all()


# Two completions, T = 3. Ratios r = exp(logp - old) chosen by hand:
#   row 0, A = +1: r = [1.5, 0.9, (1.0 masked)]
#   row 1, A = -2: r = [0.5, 1.1, 1.3]
# clip range [1 - 0.2, 1 + 0.28] = [0.8, 1.28]; per-token loss -min(r A, clip(r) A):
#   row 0: -min(1.5, 1.28) = -1.28 ; -min(0.9, 0.9) = -0.9
#   row 1: -min(-1.0, -1.6) = 1.6  ; -min(-2.2, -2.2) = 2.2 ; -min(-2.6, -2.56) = 2.6
# sum = -1.28 - 0.9 + 1.6 + 2.2 + 2.6 = 4.22 over 5 tokens.
RATIOS = [[1.5, 0.9, 1.0], [0.5, 1.1, 1.3]]
MASK = [[1, 1, 0], [1, 1, 1]]
ADVANTAGES = [1.0, -2.0]


def _batch():
    old = torch.tensor([[-1.0, -2.0, -0.5], [-3.0, -1.5, -0.25]], dtype=F64)
    logprobs = (old + torch.tensor(RATIOS, dtype=F64).log()).requires_grad_(True)
    return logprobs, old, torch.tensor(ADVANTAGES, dtype=F64), torch.tensor(MASK)


@pytest.mark.parametrize(
    "aggregation, kwargs, expected",
    [
        ("token_mean", {}, 4.22 / 5),
        ("sequence_mean", {}, ((-1.28 - 0.9) / 2 + (1.6 + 2.2 + 2.6) / 3) / 2),
        ("dr_grpo", {"max_completion_length": 4}, 4.22 / (2 * 4)),
        ("dr_grpo", {}, 4.22 / (2 * 3)),  # max_completion_length defaults to T
        ("token_mean", {"loss_normaliser": 10.0}, 4.22 / 10),
        ("sequence_mean", {"loss_normaliser": 4.0}, ((-1.28 - 0.9) / 2 + 6.4 / 3) / 4),
    ],
)
def test_grpo_loss_aggregations_by_hand(aggregation, kwargs, expected):
    logprobs, old, advantages, mask = _batch()
    loss, _ = grpo_loss(logprobs, old, advantages, mask, aggregation=aggregation, **kwargs)
    torch.testing.assert_close(loss, torch.tensor(expected, dtype=F64), **EXACT)


def test_grpo_loss_metrics_by_hand():
    logprobs, old, advantages, mask = _batch()
    _, metrics = grpo_loss(logprobs, old, advantages, mask)
    # Low-clipped: r < 0.8 with A < 0 -> row 1 token 0. High-clipped: r > 1.28 with
    # A > 0 -> row 0 token 0. Row 1 token 2 (r = 1.3, A < 0) is not clipped: min()
    # picks the unclipped term there.
    assert metrics["clip_fraction_low"] == pytest.approx(1 / 5)
    assert metrics["clip_fraction_high"] == pytest.approx(1 / 5)
    assert metrics["clip_fraction"] == pytest.approx(2 / 5)
    assert metrics["ratio_mean"] == pytest.approx((1.5 + 0.9 + 0.5 + 1.1 + 1.3) / 5)
    assert metrics["ratio_min"] == pytest.approx(0.5)
    assert metrics["ratio_max"] == pytest.approx(1.5)
    assert metrics["num_tokens"] == 5
    assert "kl" not in metrics and "entropy" not in metrics


def test_gradient_flows_only_through_unclipped_tokens():
    logprobs, old, advantages, mask = _batch()
    loss, _ = grpo_loss(logprobs, old, advantages, mask, aggregation="token_mean")
    loss.backward()
    # d/dlogp of -r A / 5 is -r A / 5 where unclipped, 0 where clipped or masked.
    expected = torch.tensor([[0.0, -0.9 * 1 / 5, 0.0], [0.0, 1.1 * 2 / 5, 1.3 * 2 / 5]], dtype=F64)
    torch.testing.assert_close(logprobs.grad, expected, **EXACT)


def test_clip_ranges_are_asymmetric():
    old = torch.zeros(1, 1, dtype=F64)
    mask = torch.ones(1, 1)

    def loss_and_grad(ratio, advantage, clip_low, clip_high):
        logprobs = torch.tensor([[math.log(ratio)]], dtype=F64, requires_grad=True)
        loss, _ = grpo_loss(
            logprobs, old, torch.tensor([advantage], dtype=F64), mask, clip_low, clip_high
        )
        loss.backward()
        return loss.item(), logprobs.grad.item()

    # A > 0, r = 1.25: inside clip-higher's 1.28 ceiling, clipped by a symmetric 1.2.
    loss, grad = loss_and_grad(1.25, 1.0, clip_low=0.2, clip_high=0.28)
    assert loss == pytest.approx(-1.25) and grad == pytest.approx(-1.25)
    loss, grad = loss_and_grad(1.25, 1.0, clip_low=0.2, clip_high=0.2)
    assert loss == pytest.approx(-1.2) and grad == 0.0
    # A < 0, r = 0.75: below the floor 0.8 -> clipped: -min(-0.75, -0.8) = 0.8, no gradient.
    loss, grad = loss_and_grad(0.75, -1.0, clip_low=0.2, clip_high=0.28)
    assert loss == pytest.approx(0.8) and grad == 0.0
    # ... and a wider floor (clip_low = 0.3 -> 0.7) lets it through.
    loss, grad = loss_and_grad(0.75, -1.0, clip_low=0.3, clip_high=0.28)
    assert loss == pytest.approx(0.75) and grad == pytest.approx(0.75)


def test_kl_k3_by_hand():
    # logp = ln 0.5, ref = ln 0.25: d = ref - logp = ln 0.5; exp(d) - d - 1 = 0.5 + ln 2 - 1.
    # logp = ln 0.25, ref = ln 0.5: d = ln 2; 2 - ln 2 - 1.
    logprobs = torch.tensor([[math.log(0.5), math.log(0.25), math.log(0.3)]], dtype=F64)
    ref = torch.tensor([[math.log(0.25), math.log(0.5), math.log(0.3)]], dtype=F64)
    expected = torch.tensor([[0.5 + math.log(2) - 1, 2 - math.log(2) - 1, 0.0]], dtype=F64)
    torch.testing.assert_close(kl_k3(logprobs, ref), expected, **EXACT)

    # In the loss: on-policy (ratio 1) with zero advantage leaves only kl_coef * k3.
    mask = torch.tensor([[1, 1, 0]])
    loss, metrics = grpo_loss(
        logprobs, None, torch.zeros(1, dtype=F64), mask, ref_logprobs=ref, kl_coef=0.1
    )
    mean_kl = (0.5 + math.log(2) - 1 + 2 - math.log(2) - 1) / 2  # = 0.25
    torch.testing.assert_close(loss, torch.tensor(0.1 * mean_kl, dtype=F64), **EXACT)
    assert metrics["kl"] == pytest.approx(mean_kl)
    # kl_coef = 0 reports the KL but does not add it.
    loss, metrics = grpo_loss(logprobs, None, torch.zeros(1, dtype=F64), mask, ref_logprobs=ref)
    assert loss.item() == 0.0 and metrics["kl"] == pytest.approx(mean_kl)


def test_entropy_metric_and_unknown_aggregation():
    logprobs, old, advantages, mask = _batch()
    entropy = torch.tensor([[1.0, 2.0, 100.0], [3.0, 4.0, 5.0]], dtype=F64)
    _, metrics = grpo_loss(logprobs, old, advantages, mask, entropy=entropy)
    assert metrics["entropy"] == pytest.approx((1 + 2 + 3 + 4 + 5) / 5)
    with pytest.raises(ValueError, match="aggregation"):
        grpo_loss(logprobs, old, advantages, mask, aggregation="mean")


def test_token_entropy_by_hand():
    # Uniform over 4: ln 4. Distribution (0.5, 0.25, 0.25): 0.5 ln 2 + 0.5 ln 4 = 1.5 ln 2.
    logits = torch.tensor(
        [[[0.0, 0.0, 0.0, 0.0], [math.log(0.5), math.log(0.25), math.log(0.25), -math.inf]]],
        dtype=F64,
    )
    torch.testing.assert_close(
        token_entropy(logits), torch.tensor([[math.log(4), 1.5 * math.log(2)]], dtype=F64), **EXACT
    )
    masked = token_entropy(logits, mask=torch.tensor([[1, 0]]))
    torch.testing.assert_close(masked, torch.tensor([[math.log(4), 0.0]], dtype=F64), **EXACT)


def test_selective_log_softmax_by_hand_and_in_bfloat16():
    # softmax(ln 0.5, ln 0.25, ln 0.25) picks: id 0 -> ln 0.5, id 2 -> ln 0.25.
    logits = torch.tensor([[[math.log(0.5), math.log(0.25), math.log(0.25)]] * 2], dtype=F64)
    picked = selective_log_softmax(logits + 7.0, torch.tensor([[0, 2]]))  # shift-invariant
    torch.testing.assert_close(
        picked, torch.tensor([[math.log(0.5), math.log(0.25)]], dtype=F64), **EXACT
    )

    # Half precision is upcast: result is float32 and matches float32 up to the
    # rounding of the bf16 inputs themselves (compare on the same rounded logits).
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 5, 50, generator=generator).to(torch.bfloat16)
    ids = torch.randint(0, 50, (3, 5), generator=generator)
    out = selective_log_softmax(logits, ids)
    assert out.dtype == torch.float32
    reference = torch.log_softmax(logits.float(), dim=-1).gather(-1, ids[..., None])[..., 0]
    torch.testing.assert_close(out, reference, rtol=0, atol=1e-6)
