"""The MD labs' error bar (:func:`replica_estimate`) against exact statistics."""

from __future__ import annotations

import math

import numpy as np
import pytest

from labtwin.simulators.md.observables import c4, replica_estimate


@pytest.mark.parametrize(("n", "exact"), [(2, math.sqrt(2 / math.pi)), (4, 0.9213177319235613)])
def test_c4_is_the_mean_sample_standard_deviation_of_normal_values(n: int, exact: float) -> None:
    # closed forms: c4(2) = sqrt(2 / pi), c4(4) = 2 sqrt(2 / (3 pi)) ... = 0.92132
    assert c4(n) == pytest.approx(exact, rel=1e-12)
    draws = np.random.default_rng(0).standard_normal((200_000, n))
    # 200,000 draws: the mean of s has a relative standard error below 0.2 %
    assert draws.std(axis=1, ddof=1).mean() == pytest.approx(exact, rel=6e-3)


def test_replica_spread_term_is_unbiased() -> None:
    """Replicas whose samples are one value repeated (each replica mean a normal draw of
    standard deviation 1, no information in the autocorrelation): the error bar of the
    grand mean of 4 replicas averages 1 / sqrt(4) over many draws, not c4(4) / sqrt(4)."""
    rng = np.random.default_rng(1)
    bars = []
    for _ in range(4_000):
        means = rng.standard_normal(4)
        series = np.repeat(means[:, None], 8, axis=1) + 1e-9 * rng.standard_normal((4, 8))
        bars.append(replica_estimate(series).stderr)
    # 4,000 draws of s/c4 (relative sd 0.42 each): the mean to 0.7 %; without the
    # correction it would read 0.921
    assert np.mean(bars) * 2 == pytest.approx(1.0, rel=0.025)
