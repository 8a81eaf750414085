"""pass@k and pass^k: exact enumeration on small cases, exact unbiasedness, large n."""

from __future__ import annotations

from fractions import Fraction
from itertools import combinations
from math import comb

import numpy as np
import pytest

from labtwin.agents.evaluation.estimators import (
    mean_pass_at_k,
    mean_pass_hat_k,
    pass_at_k,
    pass_hat_k,
)

# float64 products and log-gamma sums of at most a few thousand terms: relative error
# well below 1e-11 against the exact rationals
RTOL = 1e-11


def enumerated(n: int, c: int, k: int) -> tuple[Fraction, Fraction]:
    """Share of the k-subsets of n samples (c successes) with any / with only successes."""
    outcomes = [True] * c + [False] * (n - c)
    subsets = list(combinations(range(n), k))
    any_success = sum(any(outcomes[i] for i in s) for s in subsets)
    all_success = sum(all(outcomes[i] for i in s) for s in subsets)
    return Fraction(any_success, len(subsets)), Fraction(all_success, len(subsets))


@pytest.mark.parametrize("n", range(1, 10))
def test_estimators_equal_exact_enumeration(n: int) -> None:
    for c in range(n + 1):
        for k in range(1, n + 1):
            any_success, all_success = enumerated(n, c, k)
            assert pass_at_k(n, c, k) == pytest.approx(float(any_success), rel=RTOL, abs=1e-15)
            assert pass_hat_k(n, c, k) == pytest.approx(float(all_success), rel=RTOL, abs=1e-15)


@pytest.mark.parametrize("p", [0.03, 0.3, 0.8])
def test_estimators_are_unbiased(p: float) -> None:
    """Averaged over c ~ Binomial(n, p) (exactly, with the binomial weights), pass@k is
    1 - (1 - p)^k and pass^k is p^k, the chances for k independent tries."""
    n = 12
    weights = [comb(n, c) * p**c * (1 - p) ** (n - c) for c in range(n + 1)]
    for k in range(1, n + 1):
        at_k = sum(w * pass_at_k(n, c, k) for c, w in enumerate(weights))
        hat_k = sum(w * pass_hat_k(n, c, k) for c, w in enumerate(weights))
        assert at_k == pytest.approx(1 - (1 - p) ** k, rel=1e-12)
        assert hat_k == pytest.approx(p**k, rel=1e-12, abs=1e-300)


@pytest.mark.parametrize(("n", "c", "k"), [(2000, 5, 1000), (2000, 1990, 1500), (5000, 1, 4999)])
def test_large_n_is_stable(n: int, c: int, k: int) -> None:
    """Binomials of 600+ digits would overflow floats; the products do not."""
    exact_at_k = 1 - Fraction(comb(n - c, k), comb(n, k))
    exact_hat_k = Fraction(comb(c, k), comb(n, k))
    assert pass_at_k(n, c, k) == pytest.approx(float(exact_at_k), rel=RTOL)
    assert pass_hat_k(n, c, k) == pytest.approx(float(exact_hat_k), rel=1e-9, abs=1e-300)


def test_means_over_campaigns() -> None:
    successes, n = [0, 3, 8], 8
    k, mean, sem = mean_pass_at_k(successes, n)
    assert k.tolist() == list(range(1, n + 1))
    table = np.array([[pass_at_k(n, c, j) for j in k] for c in successes])
    assert np.allclose(mean, table.mean(axis=0))
    assert np.allclose(sem, table.std(axis=0, ddof=1) / np.sqrt(3))
    assert mean[0] == pytest.approx(11 / 24)  # pass@1 is the success rate
    k, hat, _ = mean_pass_hat_k(successes, n, ks=[1, 8])
    assert k.tolist() == [1, 8] and hat.tolist() == pytest.approx([11 / 24, 1 / 3])
    assert np.all(np.diff(mean) >= 0)  # more tries never hurt pass@k


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((0, 0, 1), "n .* at least 1"),
        ((5, 6, 1), "c .* between 0 and n"),
        ((5, -1, 1), "c .* between 0 and n"),
        ((5, 2, 0), "k must be between 1 and n"),
        ((5, 2, 6), "k must be between 1 and n"),
        ((5.0, 2, 1), "n must be an integer"),
        ((5, True, 1), "c must be an integer"),
    ],
)
def test_bad_input_is_a_clear_error(args, message: str) -> None:
    for estimator in (pass_at_k, pass_hat_k):
        with pytest.raises(ValueError, match=message):
            estimator(*args)
    with pytest.raises(ValueError, match="no campaigns"):
        mean_pass_at_k([], 4)
