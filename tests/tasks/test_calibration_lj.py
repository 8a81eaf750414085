"""LJEquationOfState-v2: error bars that match the spread over seeds, means that match a
second engine, a thermostat that reaches its set point, and notes where the EOS fails.

The full table (64 seeds at each of the lab's calibration points, OpenMM references) is the
slow test; ``bench/validation.py`` writes it to ``docs/validation.md``.
"""

from __future__ import annotations

import numpy as np
import pytest

import labtwin
from labtwin.calibration import CalibrationPoint, calibrate, calibrate_lab
from labtwin.simulators.md import eos
from labtwin.tasks import md_eos
from labtwin.testing import check_calibration_declared

LAB = "LJEquationOfState-v2"


def test_calibration_points_cover_every_observable_and_the_knob_range() -> None:
    task = labtwin.load_task(LAB)
    check_calibration_declared(task)
    points = task.calibration_points()
    temperatures = [p.experiment["temperature"] for p in points]
    densities = [p.experiment["density"] for p in points]
    lengths = {p.experiment["production_steps"] for p in points}
    assert max(temperatures) - min(temperatures) >= 1.5 and max(densities) - min(densities) >= 0.5
    assert set(md_eos.PRODUCTION_STEPS) <= lengths  # the shortest and the longest run
    assert {p.conditions["well_depth"] for p in points} > {1.0}  # a scaled fluid too


def test_short_runs_error_bars_match_the_spread_over_128_seeds() -> None:
    """The cheapest point (the shortest run, hot and dense): 128 seeds, each 4 boxes x (800 +
    200) steps (about 80 s on one core). Spread / mean error bar in [0.8, 1.25] for every
    observable; the kinetic temperature matches the thermostat within 4 SEM (its reference
    is exact, so this needs no second engine).

    Why 128 seeds: at this point a block of 64 seeds reads the ratio with a sampling error
    of about 9 %, and the blocks scatter more than that, all observables of a block together
    (one set of trajectories). Measured in blocks of 64 (seeds 0-63, 64-127, ...): with the
    MD kernels before half lists, temperature 0.85, 1.16, 1.03; with half lists (the
    trajectories change, the statistics should not), 1.29, 1.09, 1.15, 1.19, 1.00. Pooled
    over 256 seeds they read 10-12 % low (1.10, 1.10, 1.12 for P, U, T): the replica spread,
    the larger estimate in 9 runs of 10 here, averaged c4(4) = 0.921 of the true one. Since
    :func:`replica_estimate` divides it by c4 the same 256 seeds give 1.02, 1.02, 1.03."""
    task = labtwin.load_task(LAB)
    (point,) = [p for p in task.calibration_points() if p.label.startswith("hot dense")]
    results = calibrate(task, point, n_seeds=128, reference=False)
    problems = [p for r in results for p in r.problems()]
    assert not problems, problems
    (temperature,) = [r for r in results if r.observable == "temperature"]
    assert abs(temperature.mean - point.experiment["temperature"]) <= 4 * temperature.sem


def test_states_where_the_eos_does_not_hold_carry_a_note_and_others_do_not() -> None:
    task = labtwin.load_task(LAB)
    nominal = task.nominal_conditions()
    runs = task.run(
        [
            {"temperature": 2.0, "density": 0.5, "production_steps": 200},  # supercritical
            {"temperature": 1.0, "density": 0.3, "production_steps": 200},  # liquid + vapour
            {"temperature": 1.0, "density": 0.9, "production_steps": 200},  # beyond freezing
        ],
        [nominal] * 3,
        [1, 2, 3],
    )
    assert [bool(m.notes) for m in runs] == [False, True, True]
    assert "coexistence" in runs[1].notes[0] and "freezing" in runs[2].notes[0]
    assert runs[1].notes[0] in runs[1].describe()  # the agent reads it with the values
    # the note depends on the experiment only: the campaign's hidden well depth changes nothing
    for well_depth in md_eos.WELL_DEPTH_RANGE:
        (m,) = task.run(
            [{"temperature": 1.0, "density": 0.3, "production_steps": 200}],
            [{**nominal, "well_depth": well_depth}],
            [2],
        )
        assert m.notes == runs[1].notes
    # every campaign isotherm is supercritical for every well depth: no campaign's target
    # state carries a note
    for t in md_eos.ISOTHERMS:
        for rho in np.linspace(*md_eos.DENSITY_RANGE, 18):
            assert md_eos.phase_note(t / max(md_eos.WELL_DEPTH_RANGE), float(rho)) is None


def test_the_reference_engine_sums_what_openmm_integrates() -> None:
    """The reference's NumPy pair sum equals OpenMM's own energy of the same frame, and the
    Warp engine's, to float32 round-off (1e-5 relative)."""
    from labtwin.simulators.md.build import lj_fluid
    from labtwin.simulators.md.lj_reference import pair_energy_virial
    from labtwin.simulators.md.lj_warp import lj_energy_forces
    from labtwin.simulators.md.openmm_engine import OpenMMLJ

    state = lj_fluid(108, 0.8, 1.2, seed=4, dtype=np.float64)
    box = float(state.box[0, 0])
    energy, virial = pair_energy_virial(np.asarray(state.positions), box, 2.45)
    openmm_energy, _ = OpenMMLJ(cutoff=2.45, platform="Reference").energy_forces(state)
    warp_energy, _, warp_virial = lj_energy_forces(state, cutoff=2.45, device="cpu")
    assert energy == pytest.approx(float(openmm_energy[0]), rel=1e-6)
    assert energy == pytest.approx(float(warp_energy[0]), rel=1e-5)
    assert virial == pytest.approx(float(warp_virial[0]), rel=1e-5)


@pytest.mark.validation  # 17 minutes on 2 cores: outside CI (docs/validation.md)
def test_every_calibration_point_against_openmm() -> None:
    """64 seeds at each of the lab's points (about 6 minutes on one core, with the OpenMM
    references): every observable's spread / mean error bar in [0.8, 1.25], every mean
    within 4 SEM + the reference's error of an OpenMM run of the same boxes (pressure,
    energy) or of the thermostat set point (temperature)."""
    task = labtwin.load_task(LAB)
    results = calibrate_lab(task, n_seeds=64)
    assert len(results) == 3 * len(task.calibration_points())
    problems = [p for r in results for p in r.problems()]
    assert not problems, problems


@pytest.mark.slow
def test_the_longest_runs_agree_with_jzg_within_their_error_bars() -> None:
    """At the longest setting, supercritical and compressed-liquid states across the
    temperature range: the mean of 8 runs lies within 2 error bars of one run (95 %) of the
    Johnson-Zollweg-Gubbins pressure, and of its energy allowing 2 % for the EOS itself.

    The pressure's residual is the 108-atom box's finite-size bias, which the brief states
    (P* up to 4 % low; 500-atom boxes halve it: ``docs/validation.md``). The energy at the hot,
    dense state reads 2.0-2.3 % below JZG in 108-atom boxes and still 1.7 % in 500-atom boxes
    (64 and 16 boxes x 4000 steps), while the same boxes in OpenMM agree with the lab (the
    slow calibration test): that part is the fitted EOS, not the lab, hence the allowance.
    """
    task = labtwin.load_task(LAB)
    states = [(1.2, 0.8), (2.0, 0.5), (2.0, 0.8), (3.0, 0.6), (3.0, 0.9)]
    for t, rho in states:
        point = CalibrationPoint(
            f"T*={t} rho*={rho}",
            {"temperature": t, "density": rho, "production_steps": md_eos.PRODUCTION_STEPS[1]},
        )
        results = {r.observable: r for r in calibrate(task, point, n_seeds=8, reference=False)}
        pressure, energy = results["pressure"], results["potential_energy"]
        p_jzg, u_jzg = float(eos.pressure(rho, t)), float(eos.internal_energy(rho, t))
        assert abs(pressure.mean - p_jzg) <= 2 * pressure.mean_uncertainty, (t, rho, pressure)
        # the brief's stated bias (up to 4 % low) plus 2 standard errors of this 8-run mean:
        # at (1.2, 0.8) the 64-run mean is 4.0 % low (docs/validation.md) and one run's spread
        # is 3.6 % of P, so an 8-run mean scatters by 1.3 % around it; the fixed 4.5 % bound
        # this replaced failed there (4.5 % low) once the MD kernels' trajectories changed
        assert abs(pressure.mean - p_jzg) <= 0.04 * p_jzg + 2 * pressure.sem, (t, rho, pressure)
        allowed = 2 * energy.mean_uncertainty + 0.02 * abs(u_jzg)
        assert abs(energy.mean - u_jzg) <= allowed, (t, rho, energy)
