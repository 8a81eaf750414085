"""Reward against training compute: the saturating fit of Khatri et al. (2025).

    R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)

``R0`` is the reward before any RL compute, ``A`` the ceiling the recipe tends to, ``B``
its efficiency (how sharply reward rises around ``C_mid``) and ``C_mid`` the compute at
which half of the gain ``A - R0`` is reached. The fit is weighted least squares in the
parameters ``(R0, A, B, ln C_mid)`` (``scipy.optimize.curve_fit`` with bounds, from a few
starting points until one ends inside the bounds); ``ln C_mid`` makes the compute scale
symmetric, so its error bar is a factor: ``C_mid`` within ``exp(+-sigma_ln_C_mid)``.
Uncertainties are the square roots of the covariance's diagonal: with ``sigma`` the
standard errors of the points (``absolute_sigma``), otherwise scaled by the residuals. A
point at ``C = 0`` is allowed (the curve is ``R0`` there).

>>> c = np.array([0.0, 1, 3, 10, 30, 100, 300, 1000])
>>> fit = fit_reward_curve(c, saturating_reward(c, 0.2, 0.8, 1.5, 30.0))
>>> [round(v, 3) for v in (fit.R0, fit.A, fit.B, fit.C_mid)]
[0.2, 0.8, 1.5, 30.0]
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import OptimizeWarning, curve_fit
from scipy.special import expit

PARAMETERS = ("R0", "A", "B", "ln_C_mid")
B_BOUNDS = (0.05, 20.0)
#: C_mid may lie this many e-folds outside the compute the data span
C_MID_MARGIN = 3.0


def saturating_reward(
    compute: np.ndarray | float, R0: float, A: float, B: float, C_mid: float
) -> np.ndarray:
    """``R0 + (A - R0) / (1 + (C_mid / C)^B)``, ``R0`` at ``C = 0``."""
    return _model(np.asarray(compute, dtype=np.float64), R0, A, B, math.log(C_mid))


def _model(compute: np.ndarray, R0: float, A: float, B: float, ln_c_mid: float) -> np.ndarray:
    with np.errstate(divide="ignore"):
        ln_c = np.where(compute > 0, np.log(np.where(compute > 0, compute, 1.0)), -np.inf)
    return R0 + (A - R0) * expit(B * (ln_c - ln_c_mid))


def _jacobian(compute: np.ndarray, R0: float, A: float, B: float, ln_c_mid: float) -> np.ndarray:
    """d model / d (R0, A, B, ln C_mid), one row per point (0 for B and C_mid at C = 0)."""
    positive = compute > 0
    ln_c = np.log(np.where(positive, compute, 1.0))
    g = np.where(positive, expit(B * (ln_c - ln_c_mid)), 0.0)
    slope = (A - R0) * g * (1.0 - g)
    return np.stack(
        [1.0 - g, g, np.where(positive, slope * (ln_c - ln_c_mid), 0.0), -B * slope], axis=1
    )


@dataclass
class ComputeFit:
    """The fitted curve, its parameters' standard errors and the quality of the fit."""

    R0: float
    A: float
    B: float
    C_mid: float
    #: standard errors of R0, A, B and ln C_mid
    sigma: dict[str, float]
    covariance: list[list[float]]
    n_points: int
    chi2: float
    dof: int
    absolute_sigma: bool
    #: parameters that ended on a bound (their error bars mean little)
    at_bound: list[str] = field(default_factory=list)

    @property
    def C_mid_range(self) -> tuple[float, float]:
        """``C_mid`` times ``exp(-+sigma_ln_C_mid)``: its one-sigma interval."""
        s = self.sigma["ln_C_mid"]
        return self.C_mid * math.exp(-s), self.C_mid * math.exp(s)

    def predict(self, compute: np.ndarray | float) -> np.ndarray:
        return saturating_reward(compute, self.R0, self.A, self.B, self.C_mid)

    def to_dict(self) -> dict:
        return {
            "R0": self.R0,
            "A": self.A,
            "B": self.B,
            "C_mid": self.C_mid,
            "C_mid_range": list(self.C_mid_range),
            "sigma": dict(self.sigma),
            "covariance": self.covariance,
            "parameters": list(PARAMETERS),
            "n_points": self.n_points,
            "chi2": self.chi2,
            "dof": self.dof,
            "absolute_sigma": self.absolute_sigma,
            "at_bound": list(self.at_bound),
        }


def fit_reward_curve(
    compute: np.ndarray,
    reward: np.ndarray,
    sigma: np.ndarray | None = None,
) -> ComputeFit:
    """Fit ``R(C)`` to rewards measured at cumulative compute ``compute`` (>= 0).

    ``sigma``: standard error of each reward (e.g. the evaluation's std over sqrt of its
    campaigns); without it, the residuals set the scale. Needs five points or more (four
    parameters and one degree of freedom) with at least two distinct positive computes.
    Raises ValueError with the reason when the data cannot be fitted.
    """
    c = np.asarray(compute, dtype=np.float64).ravel()
    y = np.asarray(reward, dtype=np.float64).ravel()
    if c.shape != y.shape:
        raise ValueError(f"compute and reward differ in length ({c.size} and {y.size})")
    s = None if sigma is None else np.asarray(sigma, dtype=np.float64).ravel()
    if s is not None and (s.shape != y.shape or not np.all(np.isfinite(s)) or np.any(s <= 0)):
        raise ValueError("sigma must hold one finite, positive standard error per point")
    if not (np.all(np.isfinite(c)) and np.all(np.isfinite(y))) or np.any(c < 0):
        raise ValueError("compute must be finite and >= 0 and rewards finite")
    if c.size < len(PARAMETERS) + 1:
        raise ValueError(
            f"a fit of 4 parameters needs at least 5 points, got {c.size} (evaluate during "
            "training more often: labtwin train --set eval_every=N)"
        )
    positive = np.unique(c[c > 0])
    if positive.size < 2:
        raise ValueError("the compute of the points must take at least two positive values")

    ln_lo, ln_hi = math.log(positive[0]), math.log(positive[-1])
    span = max(float(np.ptp(y)), 1e-3)
    lower = [y.min() - 2 * span, y.min() - 2 * span, B_BOUNDS[0], ln_lo - C_MID_MARGIN]
    upper = [y.max() + 2 * span, y.max() + 2 * span, B_BOUNDS[1], ln_hi + C_MID_MARGIN]
    start_r0 = float(y[np.argmin(c)])
    start_a = float(y[np.argmax(c)])
    width = np.array(upper) - np.array(lower)
    best = None
    for b0, q in ((1.0, 0.5), (0.5, 0.25), (3.0, 0.75), (1.0, 0.1), (1.0, 0.9)):
        p0 = [start_r0, start_a, b0, ln_lo + q * (ln_hi - ln_lo)]
        p0 = np.clip(p0, np.array(lower) + 1e-6 * width, np.array(upper) - 1e-6 * width)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", OptimizeWarning)
                popt, pcov = curve_fit(
                    _model, c, y, p0=p0, sigma=s, absolute_sigma=s is not None,
                    bounds=(lower, upper), jac=_jacobian, max_nfev=2000,
                )  # fmt: skip
        except (RuntimeError, ValueError):
            continue
        residual = (y - _model(c, *popt)) / (1.0 if s is None else s)
        chi2 = float(residual @ residual)
        at_bound = [
            name
            for name, v, lo, hi, w in zip(PARAMETERS, popt, lower, upper, width)
            if min(v - lo, hi - v) < 1e-6 * w
        ]
        if best is None or chi2 < best[0]:
            best = (chi2, popt, pcov, at_bound)
        if not at_bound and np.all(np.isfinite(pcov)):  # an interior minimum: done
            break
    if best is None:
        raise ValueError("the fit did not converge from any starting point")
    chi2, popt, pcov, at_bound = best
    errors = np.sqrt(np.clip(np.diag(pcov), 0.0, None))
    return ComputeFit(
        R0=float(popt[0]),
        A=float(popt[1]),
        B=float(popt[2]),
        C_mid=float(math.exp(popt[3])),
        sigma={name: float(e) for name, e in zip(PARAMETERS, errors)},
        covariance=np.asarray(pcov, dtype=float).tolist(),
        n_points=int(c.size),
        chi2=chi2,
        dof=int(c.size - len(PARAMETERS)),
        absolute_sigma=s is not None,
        at_bound=at_bound,
    )
