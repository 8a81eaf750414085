"""The batch-reactor labs: chemistry, noise, costs, artifacts and the final answer."""

from __future__ import annotations

import math

import numpy as np
import pytest

import labtwin
from labtwin.simulators.kinetics import GAS_CONSTANT, consecutive_first_order
from labtwin.tasks.reactor import ABSOLUTE_NOISE, RELATIVE_NOISE, WORKUP_MIN

RUN = {"temperature_K": 330.0, "time_min": 40.0, "feed_conc_mol_L": 0.1, "catalyst_mol_pct": 5.0}


def test_noise_free_yield_matches_analytic_when_side_reaction_negligible() -> None:
    """At 0.1 mol/L the dimerisation is slow; compare with A -> B -> C plus a bound on D."""
    task = labtwin.load_task("BatchReactor-v0", noise=0.0)
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
    """Repeated runs scatter with the HPLC's stated sigma (chi-square style check, 400 runs)."""
    task = labtwin.load_task("BatchReactor-v0")
    exact = task.measure([RUN], conditions=task.nominal_conditions())
    noise_free = labtwin.load_task("BatchReactor-v0", noise=0.0).measure([RUN])[0]
    out = task.measure([RUN] * 400, seed=3)
    b = np.array([m["conc_B"] for m in out])
    sigma = RELATIVE_NOISE * noise_free["conc_B"] + ABSOLUTE_NOISE
    assert out[0].observables["conc_B"].uncertainty == pytest.approx(sigma)
    # mean within 4 standard errors; std within 15 % (400 samples: std error ~3.5 %)
    assert abs(b.mean() - noise_free["conc_B"]) < 4 * sigma / math.sqrt(400)
    assert b.std() == pytest.approx(sigma, rel=0.15)
    assert exact[0].status == "ok"


def test_cost_provenance_and_time_course_artifact() -> None:
    task = labtwin.load_task("BatchReactor-v0")
    (m,) = task.measure([RUN], seed=4)
    assert m.cost == pytest.approx((RUN["time_min"] + WORKUP_MIN) / 60) and m.cost_unit == "h"
    assert m.provenance["task"] == "BatchReactor-v0" and "seed" in m.provenance
    assert m.provenance["device"] in ("cpu", "cuda", "cuda:0")
    assert "torch" in m.provenance["versions"] and "labtwin" in m.provenance["versions"]
    course = m.artifacts["time_course"]
    assert course.shape == (41, 5)
    assert course[0, 0] == 0.0 and course[-1, 0] == pytest.approx(RUN["time_min"])
    assert course[0, 1] == pytest.approx(0.1)  # all A at t = 0


def test_campaigns_draw_different_kinetics_from_their_seed() -> None:
    task = labtwin.load_task("BatchReactor-v0")
    rng = np.random.default_rng
    assert task.sample_conditions(rng(1)) == task.sample_conditions(rng(1))
    assert task.sample_conditions(rng(1)) != task.sample_conditions(rng(2))
    fixed = labtwin.load_task("BatchReactor-v0", kinetics_spread=0.0)
    assert fixed.sample_conditions(rng(1)) == fixed.nominal_conditions()


def test_arrhenius_fit_from_two_runs_scores_near_one() -> None:
    """Two noise-free runs and the textbook two-point Arrhenius estimate recover Ea."""
    env = labtwin.make("ArrheniusFit-v0", noise=0.0)
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
    assert reward > 0.99  # exact data: the fit is exact up to RK4 error (<< 0.05 kJ/mol)
    truth = env.unwrapped.campaign.conditions["activation_energies"][0] / 1e3
    assert energy == pytest.approx(truth, abs=0.05)


def test_bad_device_or_settings_are_rejected() -> None:
    with pytest.raises(ValueError):
        labtwin.load_task("BatchReactor-v0", noise=-1)
    with pytest.raises(ValueError):
        labtwin.load_task("BatchReactor-v0", budget=0)
