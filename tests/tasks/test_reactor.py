"""The batch-reactor labs: chemistry, noise, costs, artifacts and the final answer."""

from __future__ import annotations

import math

import numpy as np
import pytest

import labtwin
from labtwin.simulators.kinetics import GAS_CONSTANT, consecutive_first_order
from labtwin.tasks.reactor import ABSOLUTE_NOISE, RELATIVE_NOISE, WORKUP_MIN, hplc

RUN = {"temperature_K": 330.0, "time_min": 40.0, "feed_conc_mol_L": 0.1, "catalyst_mol_pct": 5.0}


def test_noise_free_yield_matches_analytic_when_side_reaction_negligible() -> None:
    """At 0.1 mol/L the dimerisation is slow; compare with A -> B -> C plus a bound on D."""
    task = labtwin.load_task("BatchReactor-v1", noise=0.0)
    (m,) = task.measure([RUN])
    nominal = task.nominal_conditions()
    (a1, a2, _), (e1, e2, _) = nominal["prefactors"], nominal["activation_energies"]
    rt = GAS_CONSTANT * RUN["temperature_K"]
    k1 = a1 * math.exp(-e1 / rt) * (1 + nominal["catalyst_gain"] * RUN["catalyst_mol_pct"])
    k2 = a2 * math.exp(-e2 / rt)
    _, b, _ = consecutive_first_order(0.1, k1, k2, RUN["time_min"])
    # D takes < 3 % of A here, so the yield lies just below the analytic A->B->C value
    assert 0.97 * b / 0.1 < m["yield_B"] < b / 0.1
    total = m["conc_A"] + m["conc_B"] + m["conc_C"] + 2 * m["conc_D"]
    assert total == pytest.approx(0.1, rel=1e-9)  # mass balance, noise off


def test_measurement_noise_has_the_stated_size() -> None:
    """Repeated runs scatter with the HPLC's stated sigma, and the reported error bar matches.

    2000 runs of one experiment (B at 0.091 and C at 0.0065 mol/L, 3 sigma and
    more above zero; A and D sit at the detection floor): the mean reading lies
    within 4 standard errors of the truth, and the spread of the readings
    matches the mean reported sigma to within 4 times the sampling error of a
    standard deviation, sigma / sqrt(2 (n - 1)) = 1.6 % of sigma, i.e. 6.3 %. The reported sigma is
    the calibration at the reading (2 % of it plus 2 mmol/L), so it varies from
    run to run by 2 % of the reading's own 2 % scatter; its mean equals the
    noise's sigma to 0.1 %.
    """
    n = 2000
    task = labtwin.load_task("BatchReactor-v1")
    noise_free = labtwin.load_task("BatchReactor-v1", noise=0.0).measure([RUN])[0]
    out = task.measure([RUN] * n, seed=3)
    tolerance = 4 / math.sqrt(2 * (n - 1))
    for name in ("conc_A", "conc_B", "conc_C", "conc_D"):
        true = noise_free[name]
        sigma = RELATIVE_NOISE * true + ABSOLUTE_NOISE  # the noise the instrument adds
        readings = np.array([m[name] for m in out])
        reported = np.array([m.observables[name].uncertainty for m in out])
        np.testing.assert_allclose(reported, RELATIVE_NOISE * readings + ABSOLUTE_NOISE, rtol=1e-12)
        if true < 3 * sigma:
            # near the detection floor readings are clipped at zero: the spread is
            # smaller than the error bar says (honest, if conservative)
            assert readings.std(ddof=1) < reported.mean()
            continue
        assert reported.mean() == pytest.approx(sigma, rel=1e-3)
        assert abs(readings.mean() - true) < 4 * sigma / math.sqrt(n)
        assert readings.std(ddof=1) == pytest.approx(reported.mean(), rel=tolerance)
        z = (readings - true) / reported  # what a user computes from the reported error bars
        assert z.std(ddof=1) == pytest.approx(1.0, rel=tolerance)


def test_the_error_bar_does_not_reveal_the_true_value() -> None:
    """The reported sigma is a function of the reading alone: inverting it (the v0 leak,
    ``(sigma - floor) / 2 %``) gives back the reading, never the true concentration."""
    rng = np.random.default_rng(0)
    true = rng.uniform(0.0, 2.0, (500, 4))
    measured, sigma = hplc(true, rng)
    np.testing.assert_allclose(sigma, RELATIVE_NOISE * measured + ABSOLUTE_NOISE, rtol=1e-12)
    inverted = (sigma - ABSOLUTE_NOISE) / RELATIVE_NOISE
    np.testing.assert_allclose(inverted, measured, rtol=1e-9, atol=1e-12)
    assert np.all(np.abs(inverted - true) > 0)
    _, exact_sigma = hplc(true, rng, scale=0.0)
    assert np.all(exact_sigma == 0.0)  # noise off: exact readings, no error bar


def test_cost_provenance_and_time_course_artifact() -> None:
    task = labtwin.load_task("BatchReactor-v1")
    (m,) = task.measure([RUN], seed=4)
    assert m.cost == pytest.approx((RUN["time_min"] + WORKUP_MIN) / 60) and m.cost_unit == "h"
    assert m.provenance["task"] == "BatchReactor-v1" and "seed" in m.provenance
    assert m.provenance["device"] in ("cpu", "cuda", "cuda:0")
    assert "torch" in m.provenance["versions"] and "labtwin" in m.provenance["versions"]
    course = m.artifacts["time_course"]  # the HPLC's reading of an aliquot per sample time
    assert course.shape == (41, 5)
    assert course[0, 0] == 0.0 and course[-1, 0] == pytest.approx(RUN["time_min"])
    sigma_feed = RELATIVE_NOISE * 0.1 + ABSOLUTE_NOISE
    assert course[0, 1] == pytest.approx(0.1, abs=5 * sigma_feed)  # all A at t = 0, read
    assert course[0, 1] != 0.1  # ... with noise: the artifact is measured, not the truth
    np.testing.assert_array_equal(course[-1, 1:], [m[f"conc_{s}"] for s in "ABCD"])
    (exact,) = labtwin.load_task("BatchReactor-v1", noise=0.0).measure([RUN])
    assert exact.artifacts["time_course"][0, 1] == 0.1  # noise off: exact readings


def test_campaigns_draw_different_kinetics_from_their_seed() -> None:
    task = labtwin.load_task("BatchReactor-v1")
    rng = np.random.default_rng
    assert task.sample_conditions(rng(1)) == task.sample_conditions(rng(1))
    assert task.sample_conditions(rng(1)) != task.sample_conditions(rng(2))
    fixed = labtwin.load_task("BatchReactor-v1", kinetics_spread=0.0)
    assert fixed.sample_conditions(rng(1)) == fixed.nominal_conditions()


def test_arrhenius_fit_from_two_runs_scores_near_one() -> None:
    """Two noise-free runs and the textbook two-point Arrhenius estimate recover Ea."""
    env = labtwin.make("ArrheniusFit-v1", noise=0.0)
    env.reset(seed=5)
    rates = []
    for temperature in (320.0, 360.0):
        run = {"temperature_K": temperature, "time_min": 5.0}
        _, _, _, _, info = env.step(run)
        conversion = info["measurement"]["conversion_A"]
        rates.append(-math.log(1 - conversion) / run["time_min"])
    energy = GAS_CONSTANT * math.log(rates[1] / rates[0]) / (1 / 320.0 - 1 / 360.0) / 1e3
    _, reward, terminated, _, _ = env.step(labtwin.Answer({"activation_energy_kJ_mol": energy}))
    assert terminated
    assert (
        reward > 0.99
    )  # exact data: the fit is exact up to the integrator's error (<< 0.05 kJ/mol)
    truth = env.unwrapped.campaign.conditions["activation_energies"][0] / 1e3
    assert energy == pytest.approx(truth, abs=0.05)


def test_bad_device_or_settings_are_rejected() -> None:
    with pytest.raises(ValueError):
        labtwin.load_task("BatchReactor-v1", noise=-1)
    with pytest.raises(ValueError):
        labtwin.load_task("BatchReactor-v1", budget=0)
