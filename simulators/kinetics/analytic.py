"""Closed-form kinetics used to check the integrator."""

from __future__ import annotations

import numpy as np


def consecutive_first_order(
    a0: float | np.ndarray, k1: float | np.ndarray, k2: float | np.ndarray, t: float | np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Concentrations of A, B, C for A -k1-> B -k2-> C with B0 = C0 = 0.

    A = a0 e^{-k1 t};  B = a0 k1 / (k2 - k1) (e^{-k1 t} - e^{-k2 t});  C = a0 - A - B.
    For k1 = k2 = k the limit B = a0 k t e^{-k t} is used.
    """
    a0, k1, k2, t = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (a0, k1, k2, t)))
    a = a0 * np.exp(-k1 * t)
    equal = np.isclose(k1, k2, rtol=1e-9, atol=0.0)
    safe = np.where(equal, 1.0, k2 - k1)
    b = np.where(
        equal,
        a0 * k1 * t * np.exp(-k1 * t),
        a0 * k1 / safe * (np.exp(-k1 * t) - np.exp(-k2 * t)),
    )
    return a, b, a0 - a - b
