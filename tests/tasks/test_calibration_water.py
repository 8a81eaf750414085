"""Calibration of the water lab (:mod:`labtwin.calibration`): error bars against the spread of
repeats, means against long OpenMM runs of the same box at the same state."""

from __future__ import annotations

import numpy as np
import pytest

import labtwin
from labtwin.calibration import (
    MEAN_SEMS,
    RATIO_BAND,
    CalibrationPoint,
    calibrate,
    markdown_table,
)

#: density (g/cm^3) of the lab's box at 370 K and 1 bar with its standard error: two long
#: runs of the same protocol (100 and 60 ps after 10 ps of equilibration: 0.9073 +- 0.0049
#: and 0.9078 +- 0.0072, pymbar errors), docs/md_labs.md
HOT_DENSITY = (0.9075, 0.0041)
#: LangevinMiddle's half-step kinetic temperature at 2 fs reads warm by 0.35 +- 0.07 % of
#: the set point (14 long runs, docs/md_labs.md); allowed on top of the statistical tolerance
KINETIC_OFFSET = 0.0035


@pytest.mark.slow  # about a minute: OpenMM water experiments take 8-11 s each
def test_water_hottest_state_is_equilibrated_and_grossly_calibrated() -> None:
    """370 K and 1 bar with the shortest run: the largest density fluctuations of the knob
    box and the state v1 could not equilibrate (its thermostat lagged by tens of K). Six
    seeds (about 25 s): the kinetic temperature is the set point and the density is that of
    long runs, each within 4 standard errors of the six-run mean (plus the reference's error
    and the integrator's offset); spread / error bar in [0.4, 2.5] for every observable (six
    runs: the ratio's own relative error is about 30 %, so only gross miscalibration fails)."""
    task = labtwin.load_task("WaterDensity-v2")
    point = CalibrationPoint(
        "hot, 1 bar", {"temperature_K": 370.0, "pressure_bar": 1.0, "production_ps": 0.25}
    )
    results = {r.observable: r for r in calibrate(task, point, n_seeds=6, reference=False)}
    assert set(results) == {"density", "potential_energy", "temperature"}
    for r in results.values():
        assert r.n_ok == 6 and 0.4 <= r.ratio <= 2.5, r
    temperature, density = results["temperature"], results["density"]
    assert abs(temperature.mean - 370.0) <= MEAN_SEMS * temperature.sem + KINETIC_OFFSET * 370
    assert abs(density.mean - HOT_DENSITY[0]) <= MEAN_SEMS * density.sem + HOT_DENSITY[1]


def test_water_calibration_points_span_the_knob_box() -> None:
    task = labtwin.load_task("WaterDensity-v2")
    points = task.calibration_points()
    assert len(points) >= 3
    runs = np.array(
        [
            [p.experiment[k] for k in ("temperature_K", "pressure_bar", "production_ps")]
            for p in points
        ]
    )
    assert runs[:, 0].min() == 275.0 and runs[:, 0].max() == 370.0
    assert runs[:, 1].min() == 1.0 and runs[:, 1].max() == 2000.0
    assert runs[:, 2].min() == 0.25 and runs[:, 2].max() == 1.0


@pytest.mark.validation  # 10 minutes on 2 cores: outside CI (docs/validation.md)
def test_water_lab_is_calibrated_at_its_shortest_run() -> None:
    """The calibration of the cold point with the shortest run (64 seeds, about 10 minutes
    on 2 cores), against 4 x 20 ps OpenMM runs of the same box (density, potential energy)
    and the thermostat set point (kinetic temperature). Criteria of
    :mod:`labtwin.calibration`: spread / mean error bar in RATIO_BAND and the mean within
    MEAN_SEMS standard errors plus the reference's error. The full table over all three
    points (35 minutes) is ``docs/validation.md``, from ``python bench/validation.py --lab
    WaterDensity-v2``: every ratio 0.89-1.19, every mean within 4.3 SEM with the
    reference's error allowed."""
    task = labtwin.load_task("WaterDensity-v2")
    (point, *_) = task.calibration_points()
    assert point.experiment["production_ps"] == 0.25
    results = calibrate(task, point, n_seeds=task.calibration_n_seeds)
    print("\n" + markdown_table(results))
    assert RATIO_BAND == (0.8, 1.25) and task.calibration_n_seeds == 64
    assert len(results) == 3
    problems = [p for r in results for p in r.problems()]
    assert not problems, "\n".join(problems)
