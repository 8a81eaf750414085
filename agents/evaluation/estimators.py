"""Unbiased pass@k and pass^k from ``n`` sampled campaigns of which ``c`` succeeded.

Draw ``k`` of the ``n`` samples without replacement. pass@k is the chance that at least
one of them succeeded, pass^k the chance that all did:

    pass@k = 1 - C(n - c, k) / C(n, k)        pass^k = C(c, k) / C(n, k)

Both are unbiased estimators of the probability that ``k`` independent tries of the agent
contain a success (pass@k, Chen et al. 2021) or are all successes (pass^k, Yao et al.
2024), for every ``k <= n``. The binomials overflow long before the ratios do, so they are
computed as products: ``C(n - c, k) / C(n, k) = prod_{i = n - c + 1}^{n} (1 - k / i)``,
summed in logs with ``log1p``, and pass^k from log-gamma functions.

>>> pass_at_k(10, 1, 1), pass_at_k(10, 1, 10), round(pass_at_k(10, 2, 5), 4)
(0.1, 1.0, 0.7778)
>>> pass_hat_k(10, 10, 5), pass_hat_k(10, 9, 10), round(pass_hat_k(10, 8, 2), 4)
(1.0, 0.0, 0.6222)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def _check(n: int, c: int, k: int) -> tuple[int, int, int]:
    for name, value in (("n", n), ("c", c), ("k", k)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ValueError(f"{name} must be an integer, got {value!r}")
    n, c, k = int(n), int(c), int(k)
    if n < 1:
        raise ValueError(f"n (samples) must be at least 1, got {n}")
    if not 0 <= c <= n:
        raise ValueError(f"c (successes) must be between 0 and n = {n}, got {c}")
    if not 1 <= k <= n:
        raise ValueError(f"k must be between 1 and n = {n}, got {k}")
    return n, c, k


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one campaign: ``1 - C(n - c, k) / C(n, k)``."""
    n, c, k = _check(n, c, k)
    if n - c < k:  # every k-subset holds a success
        return 1.0
    i = np.arange(n - c + 1, n + 1, dtype=np.float64)
    return float(-np.expm1(np.sum(np.log1p(-k / i))))


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased pass^k of one campaign: ``C(c, k) / C(n, k)``."""
    n, c, k = _check(n, c, k)
    if k > c:
        return 0.0
    log_ratio = (
        math.lgamma(c + 1) - math.lgamma(c - k + 1) - math.lgamma(n + 1) + math.lgamma(n - k + 1)
    )
    return min(math.exp(log_ratio), 1.0)


def _mean_over_campaigns(
    estimator, successes: Sequence[int], n: int, ks: Sequence[int] | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    counts = list(successes)
    if not counts:
        raise ValueError("no campaigns to average over")
    ks = np.arange(1, n + 1) if ks is None else np.asarray(list(ks), dtype=int)
    table = np.array([[estimator(n, c, int(k)) for k in ks] for c in counts])
    mean = table.mean(axis=0)
    sem = table.std(axis=0, ddof=1) / math.sqrt(len(counts)) if len(counts) > 1 else 0 * mean
    return ks, mean, sem


def mean_pass_at_k(
    successes: Sequence[int], n: int, ks: Sequence[int] | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """pass@k averaged over campaigns: ``successes[i]`` of ``n`` samples of campaign ``i``
    succeeded. Returns ``(k, mean, standard error over campaigns)`` for ``k`` in ``ks``
    (default 1..n)."""
    return _mean_over_campaigns(pass_at_k, successes, n, ks)


def mean_pass_hat_k(
    successes: Sequence[int], n: int, ks: Sequence[int] | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """pass^k averaged over campaigns (as :func:`mean_pass_at_k`)."""
    return _mean_over_campaigns(pass_hat_k, successes, n, ks)
