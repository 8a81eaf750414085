"""The reward-vs-compute fit recovers known parameters and its error bars cover the truth."""

from __future__ import annotations

import math

import numpy as np
import pytest

from labtwin.agents.evaluation.compute_fit import fit_reward_curve, saturating_reward

TRUTH = {"R0": 0.2, "A": 0.8, "B": 1.5, "C_mid": 200.0}
#: a training run's evaluations: one before RL (C = 0), then log-spaced checkpoints
COMPUTE = np.concatenate([[0.0], np.logspace(0.5, 4.0, 14)])
NOISE = 0.02  # standard error of each evaluation's mean reward
DRAWS = 200
#: 2-sigma intervals should cover the truth in 95.4 % of draws; with 200 draws the binomial
#: standard error of that share is 1.5 %, and the fit is nonlinear (its covariance is a
#: linearisation), so the accepted band is 0.90-0.99
COVERAGE_BAND = (0.90, 0.99)


def estimates(fit) -> dict[str, float]:
    return {"R0": fit.R0, "A": fit.A, "B": fit.B, "ln_C_mid": math.log(fit.C_mid)}


TRUE_ESTIMATES = {**{k: TRUTH[k] for k in ("R0", "A", "B")}, "ln_C_mid": math.log(200.0)}


def test_the_formula() -> None:
    c = np.array([0.0, 200.0, 1e12])
    r = saturating_reward(c, **TRUTH)
    assert r[0] == TRUTH["R0"]  # no compute: the starting reward
    assert r[1] == pytest.approx((TRUTH["R0"] + TRUTH["A"]) / 2)  # half the gain at C_mid
    assert r[2] == pytest.approx(TRUTH["A"], abs=1e-9)  # the ceiling
    direct = TRUTH["R0"] + (TRUTH["A"] - TRUTH["R0"]) / (1 + (TRUTH["C_mid"] / 50.0) ** 1.5)
    assert saturating_reward(50.0, **TRUTH) == pytest.approx(direct, rel=1e-14)


def test_noise_free_data_give_the_parameters_back() -> None:
    fit = fit_reward_curve(COMPUTE, saturating_reward(COMPUTE, **TRUTH))
    assert fit.R0 == pytest.approx(TRUTH["R0"], abs=1e-6)
    assert fit.A == pytest.approx(TRUTH["A"], abs=1e-6)
    assert fit.B == pytest.approx(TRUTH["B"], rel=1e-5)
    assert fit.C_mid == pytest.approx(TRUTH["C_mid"], rel=1e-5)
    assert fit.at_bound == [] and fit.dof == len(COMPUTE) - 4


def test_noisy_data_recover_the_parameters_and_the_error_bars_cover_them() -> None:
    rng = np.random.default_rng(2025)
    sigma = np.full(COMPUTE.size, NOISE)
    covered = dict.fromkeys(TRUE_ESTIMATES, 0)
    errors = {k: [] for k in TRUE_ESTIMATES}
    for _ in range(DRAWS):
        reward = saturating_reward(COMPUTE, **TRUTH) + rng.normal(0.0, NOISE, COMPUTE.size)
        fit = fit_reward_curve(COMPUTE, reward, sigma)
        for key, value in estimates(fit).items():
            errors[key].append(value - TRUE_ESTIMATES[key])
            covered[key] += abs(value - TRUE_ESTIMATES[key]) < 2 * fit.sigma[key]
    for key in TRUE_ESTIMATES:
        share = covered[key] / DRAWS
        assert COVERAGE_BAND[0] <= share <= COVERAGE_BAND[1], (key, share)
        # unbiased within 3 standard errors of the mean over the draws
        e = np.array(errors[key])
        assert abs(e.mean()) < 3 * e.std() / math.sqrt(DRAWS), key
    # recovery: the ceiling to within 0.02 and the efficiency to within 20 % (typical draw)
    assert np.median(np.abs(errors["A"])) < 0.02
    assert np.median(np.abs(errors["B"])) < 0.2 * TRUTH["B"]


def test_without_sigma_the_residuals_set_the_scale() -> None:
    rng = np.random.default_rng(7)
    reward = saturating_reward(COMPUTE, **TRUTH) + rng.normal(0.0, NOISE, COMPUTE.size)
    scaled = fit_reward_curve(COMPUTE, reward)
    absolute = fit_reward_curve(COMPUTE, reward, np.full(COMPUTE.size, NOISE))
    assert not scaled.absolute_sigma and absolute.absolute_sigma
    assert scaled.A == pytest.approx(absolute.A, rel=1e-4)
    # the residual scale is an estimate of the noise: the error bars agree within a factor 2
    assert 0.5 < scaled.sigma["A"] / absolute.sigma["A"] < 2.0


@pytest.mark.parametrize(
    ("compute", "reward", "sigma", "message"),
    [
        ([0, 1, 2, 3], [0, 1, 2, 3], None, "at least 5 points"),
        ([0, 1, 2, 3, 4], [0, 1, 2], None, "differ in length"),
        ([-1, 1, 2, 3, 4], [0, 1, 2, 3, 4], None, "compute must be finite and >= 0"),
        ([0, 1, 2, 3, np.nan], [0, 1, 2, 3, 4], None, "finite"),
        ([0, 0, 0, 0, 5], [0, 1, 2, 3, 4], None, "two positive values"),
        ([0, 1, 2, 3, 4], [0, 1, 2, 3, 4], [1, 1, 0, 1, 1], "positive standard error"),
    ],
)
def test_bad_input_is_a_clear_error(compute, reward, sigma, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        fit_reward_curve(np.array(compute, float), np.array(reward, float), sigma)
