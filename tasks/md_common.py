"""Shared by the MD labs: the closeness score of a measurement to a target, and provenance."""

from __future__ import annotations

import math


def target_closeness(measured: float, uncertainty: float, target: float, tolerance: float) -> float:
    """Expected closeness of the true value to ``target``, in [0, 1].

    Closeness of a value x is ``exp(-(x - target)^2 / (2 tolerance^2))``; the true value is
    taken as Gaussian about ``measured`` with standard deviation ``uncertainty``. The
    expectation is ``tolerance / s * exp(-(measured - target)^2 / (2 s^2))`` with
    ``s^2 = tolerance^2 + uncertainty^2``: a measurement on target scores 1 only when its
    error bar is small against the tolerance, so precision pays as well as accuracy.

    >>> target_closeness(1.0, 0.0, 1.0, 0.1)
    1.0
    >>> round(target_closeness(1.0, 0.1, 1.0, 0.1), 4)  # on target, error bar = tolerance
    0.7071
    >>> round(target_closeness(1.2, 0.0, 1.0, 0.1), 4)  # two tolerances off
    0.1353
    """
    if tolerance <= 0:
        raise ValueError(f"tolerance must be positive, got {tolerance}")
    s2 = tolerance**2 + uncertainty**2
    return tolerance / math.sqrt(s2) * math.exp(-0.5 * (measured - target) ** 2 / s2)


def engine_versions(*names: str) -> dict[str, str]:
    """Installed versions of the named engine packages (for provenance)."""
    from labtwin.task import package_versions

    return {k: v for k, v in package_versions(*names).items() if k != "labtwin"}
