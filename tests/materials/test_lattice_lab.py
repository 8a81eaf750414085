"""LatticeConstant-v1: the reference against ASE, the hidden material (scaled exactly; the
memorised v0 answers fail), scoring and success, invalid input, the analysis tool and the
scripted baselines (the lab's contract is checked for every registered
lab in tests/core/test_check_lab.py).

Tolerances (named once, here):

- warp against ASE's EMT (``asap_cutoff=True``) on the same cells: the same closed form in
  float64, so 1e-11 eV/atom (as in test_emt_warp.py);
- the lab's Birch-Murnaghan reference against ASE's ``EquationOfState`` fitted to ASE's EMT
  energies on the same 41 lattice constants: the two fits see energies equal to 1e-13, so
  their minima agree to 1e-7 Å and B to 1e-5 relative (the fit's own round-off);
- the reference against the analytic pressure: the root of P(a) within 1e-5 Å of the fitted
  minimum, -V dP/dV (central difference, 1e-4 strain) within 0.1 % of the fitted B (the
  Birch-Murnaghan form over ±0.25 % leaves a 4th-order residual of that size on Al and the
  alloys; measured at most 7e-8 Å and 0.025 %);
- converged: a fit over ±0.1 % agrees with the reference to 1e-5 Å and 0.1 % (measured
  7e-8 Å and 0.02 %).
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import labtwin
from labtwin import Analysis, Answer
from labtwin.campaign import CampaignBatch
from labtwin.simulators.materials.bulk import (
    CUBIC_CRYSTALS,
    REFERENCE_POINTS,
    REFERENCE_STRAIN,
    cubic_cell,
    evaluate_lattice_constants,
    fit_birch_murnaghan,
    reference_equation_of_state,
    zero_pressure_lattice_constant,
)
from labtwin.simulators.materials.eos import EV_PER_A3_IN_GPA
from labtwin.tasks.materials_common import (
    draw_scales,
)
from labtwin.tasks.materials_lattice import (
    BULK_TOLERANCE,
    CRYSTALS,
    LATTICE_RANGE_A,
    LATTICE_TOLERANCE_A,
    SUCCESS_SCORE,
    answer_score,
)

LAB = "LatticeConstant-v1"
E_EV_ATOM = 1e-11
FIT_A, FIT_B = 1e-7, 1e-5
ROOT_A, SLOPE_B = 1e-5, 1e-3
CONVERGED_A, CONVERGED_B = 1e-5, 1e-3


@pytest.fixture(scope="module")
def task():
    return labtwin.load_task(LAB)


def _grid(name: str) -> np.ndarray:
    a0 = zero_pressure_lattice_constant(name)
    return a0 * np.linspace(1 - REFERENCE_STRAIN, 1 + REFERENCE_STRAIN, REFERENCE_POINTS)


@pytest.mark.parametrize("name", ["Cu", "Al", "Pt", "Cu3Au", "Ni3Al"])
def test_reference_agrees_with_ase_eos_on_ase_emt_energies(name) -> None:
    """ASE's EMT energies on the reference grid, fitted by ASE's EquationOfState, give the
    lab's reference a0 and B; the warp energies and pressures equal ASE's on those cells."""
    from ase.calculators.emt import EMT
    from ase.eos import EquationOfState

    grid = _grid(name)
    lab = evaluate_lattice_constants([name] * len(grid), grid)
    energies, pressures = [], []
    for a in grid:
        atoms = cubic_cell(name, float(a)).to_ase()
        atoms.calc = EMT(asap_cutoff=True)
        energies.append(atoms.get_potential_energy() / len(atoms))
        if len(pressures) < 3:  # the stress of three cells (ASE's EMT stress is slow)
            pressures.append(-atoms.get_stress()[:3].mean() * EV_PER_A3_IN_GPA)
    np.testing.assert_allclose(lab.energy_per_atom_eV, energies, rtol=0, atol=E_EV_ATOM)
    np.testing.assert_allclose(lab.pressure_GPa[:3], pressures, rtol=0, atol=1e-9)
    v0, _, b = EquationOfState(grid**3 / 4, energies, eos="birchmurnaghan").fit()
    reference = reference_equation_of_state(name)
    assert reference.lattice_constant_A == pytest.approx((4 * v0) ** (1 / 3), abs=FIT_A)
    assert reference.bulk_modulus_GPa == pytest.approx(b * EV_PER_A3_IN_GPA, rel=FIT_B)


@pytest.mark.parametrize("name", CRYSTALS)
def test_reference_is_the_zero_of_the_pressure_and_converged(name) -> None:
    reference = reference_equation_of_state(name)
    a0 = zero_pressure_lattice_constant(name)
    assert reference.lattice_constant_A == pytest.approx(a0, abs=ROOT_A)
    h = 1e-4
    p = evaluate_lattice_constants([name] * 2, [a0 * (1 - h), a0 * (1 + h)]).pressure_GPa
    volume = a0**3 / 4
    slope = (p[1] - p[0]) / (volume * ((1 + h) ** 3 - (1 - h) ** 3))
    assert reference.bulk_modulus_GPa == pytest.approx(-volume * slope, rel=SLOPE_B)
    narrow = a0 * np.linspace(0.999, 1.001, 21)
    points = evaluate_lattice_constants([name] * len(narrow), narrow)
    fit = fit_birch_murnaghan(points.volume_per_atom_A3, points.energy_per_atom_eV)
    assert fit.lattice_constant_A == pytest.approx(reference.lattice_constant_A, abs=CONVERGED_A)
    assert fit.bulk_modulus_GPa == pytest.approx(reference.bulk_modulus_GPa, rel=CONVERGED_B)
    assert max(points.max_force_eV_A) < 1e-12  # symmetric sites: no force at any strain


def test_the_references_are_those_of_emt() -> None:
    """The elements' a0 and B lie near what EMT's parameters imply in closed form (within
    2 % and 8 %; docs/materials.md) and the L1_2 alloys between their elements (Vegard's law
    to 1.5 %)."""
    for name, (host, solute) in CUBIC_CRYSTALS.items():
        reference = reference_equation_of_state(name)
        if solute is None:
            a, b = closed_form(host)
            assert reference.lattice_constant_A == pytest.approx(a, rel=0.02)
            assert reference.bulk_modulus_GPa == pytest.approx(b, rel=0.08)
        else:
            vegard = 0.75 * zero_pressure_lattice_constant(host) + 0.25 * (
                zero_pressure_lattice_constant(solute)
            )
            assert reference.lattice_constant_A == pytest.approx(vegard, rel=0.015)


def test_a_measurement_reads_the_cell_at_the_chosen_lattice_constant(task) -> None:
    conditions = task.conditions_of("Ni3Al")
    low, high = task.measure(
        [{"lattice_constant_A": 3.55}, {"lattice_constant_A": 3.75}], conditions=conditions
    )
    assert low.ok and high.ok
    assert low["pressure_GPa"] > 0 > high["pressure_GPa"]  # compressed, stretched
    assert low["volume_per_atom_A3"] == pytest.approx(3.55**3 / 4, rel=1e-14)
    assert low.cost == 4 and low.cost_unit == "atom-evaluations"
    assert sorted(low.artifacts["structure_numbers"]) == [13, 28, 28, 28]
    assert low.artifacts["structure_cell"] == pytest.approx(3.55 * np.eye(3))
    assert all(v.uncertainty == 0 for v in low.observables.values())
    # a batch is one evaluation: each experiment reads as if alone, to the last bit
    (alone,) = task.measure([{"lattice_constant_A": 3.75}], conditions=conditions)
    assert alone.observables == high.observables


def test_a_campaign_measures_the_named_crystal_scaled_exactly(task) -> None:
    """Corresponding states: at hidden factors (1.03, 0.85) the lab reads the named crystal at
    a / 1.03, with energies times 0.85, pressures times 0.85 / 1.03^3, volumes and the cell
    times 1.03^3 and 1.03 (rel 1e-12: one or two roundings of a float64 product), and its
    reference a0 and B scale the same way."""
    scaled = task.conditions_of("Cu3Au", 1.03, 0.85)
    plain = task.conditions_of("Cu3Au")
    a = 3.79
    (m,) = task.measure([{"lattice_constant_A": a}], conditions=scaled)
    (ref,) = task.measure([{"lattice_constant_A": a / 1.03}], conditions=plain)
    assert m["energy_per_atom_eV"] == pytest.approx(0.85 * ref["energy_per_atom_eV"], rel=1e-12)
    assert m["pressure_GPa"] == pytest.approx(0.85 / 1.03**3 * ref["pressure_GPa"], rel=1e-12)
    assert m["volume_per_atom_A3"] == pytest.approx(a**3 / 4, rel=1e-12)
    assert m.artifacts["structure_cell"] == pytest.approx(a * np.eye(3), rel=1e-12)
    assert m.artifacts["structure_positions"] == pytest.approx(
        1.03 * np.asarray(ref.artifacts["structure_positions"]), rel=1e-12
    )
    assert m.cost == ref.cost
    assert scaled["reference_lattice_constant_A"] == pytest.approx(
        1.03 * plain["reference_lattice_constant_A"], rel=1e-15
    )
    assert scaled["reference_bulk_modulus_GPa"] == pytest.approx(
        0.85 / 1.03**3 * plain["reference_bulk_modulus_GPa"], rel=1e-15
    )
    # the scaled reference is the zero of the scaled material's pressure
    (zero,) = task.measure(
        [{"lattice_constant_A": scaled["reference_lattice_constant_A"]}], conditions=scaled
    )
    assert abs(zero["pressure_GPa"]) < 1e-4


def test_the_memorised_table_answer_fails_on_hidden_materials(task) -> None:
    """The v0 exploit: answering the named crystal's published a0 and B with no experiment
    scored 1 on every campaign. On 200 sampled campaigns it succeeds at most twice: a0 spreads
    over ±4 % (±140 mÅ) against a 2 mÅ tolerance, so a lucky draw needs the length factor
    within 1 ± 0.0006 (1.4 % of draws) and the energy factor within 2 % of 1 too (10 %), 0.3
    successes expected."""
    successes = 0
    for seed in range(200):
        conditions = task.sample_conditions(np.random.default_rng(seed))
        table = reference_equation_of_state(conditions["crystal"])
        answer = task.parse_answer(
            {
                "lattice_constant_A": table.lattice_constant_A,
                "bulk_modulus_GPa": table.bulk_modulus_GPa,
            }
        )
        successes += task.score_answer(answer, conditions, []) >= SUCCESS_SCORE
    assert successes <= 2
    plain = task.conditions_of("Cu")  # what v0 measured: the table answer is exact
    table = reference_equation_of_state("Cu")
    exact = task.parse_answer(
        {"lattice_constant_A": table.lattice_constant_A, "bulk_modulus_GPa": table.bulk_modulus_GPa}
    )
    assert task.score_answer(exact, plain, []) == 1.0


def test_answer_score_and_its_tolerance() -> None:
    assert answer_score(3.6, 140.0, 3.6, 140.0) == 1.0
    assert answer_score(3.6 + LATTICE_TOLERANCE_A, 140.0, 3.6, 140.0) == pytest.approx(
        SUCCESS_SCORE
    )
    on_ellipse = answer_score(
        3.6 + LATTICE_TOLERANCE_A * math.sqrt(0.5), 140 * (1 + BULK_TOLERANCE * math.sqrt(0.5)),
        3.6, 140.0,
    )  # fmt: skip
    assert on_ellipse == pytest.approx(SUCCESS_SCORE)
    assert answer_score(3.6, 140.0 * 1.05, 3.6, 140.0) < 0.05


def _answer_campaign(task, crystal: str, answer: dict) -> tuple[float, bool]:
    batch = CampaignBatch(task, 1)
    (campaign,) = batch.reset([0], [0], conditions=[task.conditions_of(crystal)])
    (record,) = batch.step([0], [{"lattice_constant_A": 3.6}])
    (record,) = batch.step([0], [Answer(answer)])
    assert record.kind == "answer" and campaign.done
    return record.score, task.success(campaign.history, campaign.conditions)


def test_hand_built_answers_succeed_or_fail_by_the_tolerance(task) -> None:
    reference = reference_equation_of_state("Pd")
    a, b = reference.lattice_constant_A, reference.bulk_modulus_GPa
    exact = {"lattice_constant_A": a, "bulk_modulus_GPa": b}
    score, success = _answer_campaign(task, "Pd", exact)
    assert score == pytest.approx(1.0) and success
    near = {"lattice_constant_A": a + 0.0015, "bulk_modulus_GPa": b * 1.01}
    score, success = _answer_campaign(task, "Pd", near)
    assert score == pytest.approx(math.exp(-0.5 * (0.75**2 + 0.5**2))) and success
    for off in (
        {**exact, "lattice_constant_A": a + 0.003},
        {**exact, "bulk_modulus_GPa": b * 1.03},
    ):
        score, success = _answer_campaign(task, "Pd", off)
        assert score < SUCCESS_SCORE and not success
    # the experimental Pd lattice constant (3.89 Å) is not EMT's
    score, success = _answer_campaign(task, "Pd", {**exact, "lattice_constant_A": 3.89})
    assert not success


@pytest.mark.parametrize(
    "bad, where",
    [
        ({"lattice_constant_A": LATTICE_RANGE_A[0] - 0.01}, "greater than or equal"),
        ({"lattice_constant_A": 12.0}, "less than or equal"),
        ({"lattice_constant_A": -3.6}, "greater than or equal"),
        ({"lattice_constant_A": float("nan")}, "lattice_constant_A"),
        ({"lattice_constant_A": "3.6 Å"}, "lattice_constant_A"),
        ({"lattice_constant_A": 3.6, "energy_per_atom_eV": -5.0}, "energy_per_atom_eV"),
        ({}, "lattice_constant_A"),
        (np.zeros(()), "shape"),
        (np.array([[0.1]]), "shape"),
        (np.array([1.5]), "outside"),
    ],
)
def test_out_of_range_and_absurd_lattice_constants_are_invalid(task, bad, where) -> None:
    (m,) = task.measure([bad])
    assert m.status == "invalid" and where in m.reason and len(m.reason) < 300


@pytest.mark.parametrize(
    "answer",
    [
        {"lattice_constant_A": 0.0, "bulk_modulus_GPa": 100.0},
        {"lattice_constant_A": 3.6, "bulk_modulus_GPa": -1.0},
        {"lattice_constant_A": 3.6},
        {"lattice_constant_A": float("inf"), "bulk_modulus_GPa": 100.0},
    ],
)
def test_bad_answers_are_invalid_and_the_campaign_goes_on(task, answer) -> None:
    batch = CampaignBatch(task, 1)
    (campaign,) = batch.reset([0], [0])
    (record,) = batch.step([0], [Answer(answer)])
    assert record.kind == "answer" and record.measurement.status == "invalid"
    assert record.score == 0.0 and not campaign.done


def test_the_analysis_tool_fits_the_readings_so_far(task) -> None:
    conditions = task.conditions_of("Au")
    reference = reference_equation_of_state("Au")
    batch = CampaignBatch(task, 1)
    batch.reset([0], [0], conditions=[conditions])
    (record,) = batch.step([0], [Analysis("fit_equation_of_state", {})])
    assert "needs 4" in record.note and record.score is None
    a0 = reference.lattice_constant_A
    for a in a0 * np.array([0.996, 0.998, 1.0005, 1.002, 1.004]):
        batch.step([0], [{"lattice_constant_A": float(a)}])
    (record,) = batch.step([0], [Analysis("fit_equation_of_state", {})])
    fit, pressure = parse_note(record.note)
    assert fit[0] == pytest.approx(a0, abs=2e-5) and fit[1] == pytest.approx(
        reference.bulk_modulus_GPa, rel=2e-3
    )
    assert pressure[0] == pytest.approx(a0, abs=1e-4)  # linear in V between readings
    assert batch.campaigns[0].experiments == 5  # analysis calls spend no budget
    one_side = CampaignBatch(task, 1)
    one_side.reset([0], [0], conditions=[conditions])
    for a in a0 * np.array([1.01, 1.02, 1.03, 1.04]):  # all stretched: no minimum inside
        one_side.step([0], [{"lattice_constant_A": float(a)}])
    (record,) = one_side.step([0], [Analysis("fit_equation_of_state", {})])
    assert "outside the measured volumes" in record.note


def test_no_impossible_variant() -> None:
    with pytest.raises(ValueError, match="no impossible variant"):
        labtwin.load_task(LAB, impossible=True)


# ---- scripted baselines (the lab's reference figures) ------------------------------------


def closed_form(element: str) -> tuple[float, float]:
    """a (Å) and B (GPa) at the minimum of E(s) = E0 (1 + lambda (s - s0)) e^(-lambda (s - s0))
    with EMT's parameters (ASE's table): a = s0 (16 pi / 3)^(1/3), B = -E0 lambda^2 / (12 pi s0)."""
    from ase.calculators.emt import parameters
    from ase.units import Bohr

    e0, s0, _, _, _, lam, _ = parameters[element]
    s0, lam = s0 * Bohr, lam / Bohr
    return s0 * (16 * math.pi / 3) ** (1 / 3), -e0 * lam**2 / (12 * math.pi * s0) * EV_PER_A3_IN_GPA


def guess(crystal: str) -> tuple[float, float]:
    """The closed form; Vegard's law (3:1) for the L1_2 alloys."""
    host, solute = CUBIC_CRYSTALS[crystal]
    if solute is None:
        return closed_form(host)
    (ah, bh), (as_, bs) = closed_form(host), closed_form(solute)
    return 0.75 * ah + 0.25 * as_, 0.75 * bh + 0.25 * bs


def parse_note(note: str) -> tuple[tuple[float, float] | None, tuple[float, float] | None]:
    """(a0, B) of the tool's Birch-Murnaghan fit and of its pressure interpolation."""
    fit = re.search(r"a0 = ([\d.]+) Å, B = ([\d.]+) GPa", note)
    pressure = re.search(r"P = 0 at a = ([\d.]+) Å, -V dP/dV = ([-\d.]+) GPa", note)
    return (
        (float(fit[1]), float(fit[2])) if fit else None,
        (float(pressure[1]), float(pressure[2])) if pressure else None,
    )


def memorised(crystal, step, rng):
    """The v0 exploit: the named crystal's own a0 and B (the published table), no experiment."""
    table = reference_equation_of_state(crystal)
    step(Answer({"lattice_constant_A": table.lattice_constant_A,
                 "bulk_modulus_GPa": table.bulk_modulus_GPa}))  # fmt: skip


def blind(crystal, step, rng):
    a, b = guess(crystal)
    step(Answer({"lattice_constant_A": a, "bulk_modulus_GPa": b}))


def _grid_then_fit(crystal, step, points):
    a_guess, b_guess = guess(crystal)
    for a in points(a_guess):
        step({"lattice_constant_A": float(np.clip(a, *LATTICE_RANGE_A))})
    fit, _ = parse_note(step(Analysis("fit_equation_of_state", {})).note)
    a, b = fit or (a_guess, b_guess)
    step(Answer({"lattice_constant_A": a, "bulk_modulus_GPa": b}))


def wide_grid(crystal, step, rng):
    _grid_then_fit(crystal, step, lambda a: a * np.linspace(0.95, 1.05, 7))


def random_points(crystal, step, rng):
    _grid_then_fit(crystal, step, lambda a: rng.uniform(*LATTICE_RANGE_A, 7))


def pressure_guided(crystal, step, rng):
    """Newton steps on P(a) = 0 from the guess (dP/da = -3 B / a), then B = -V dP/dV from
    two readings 0.1 % either side of the root."""
    a, b = guess(crystal)
    for _ in range(3):
        p = step({"lattice_constant_A": a}).measurement["pressure_GPa"]
        a = float(np.clip(a * (1 + p / (3 * b)), *LATTICE_RANGE_A))
    readings = [step({"lattice_constant_A": a * f}).measurement for f in (0.999, 1.001)]
    (v1, p1), (v2, p2) = ((m["volume_per_atom_A3"], m["pressure_GPa"]) for m in readings)
    b = -0.5 * (v1 + v2) * (p2 - p1) / (v2 - v1)
    a_root = a * (0.999 + 0.002 * p1 / (p1 - p2))  # linear interpolation of P = 0
    step(Answer({"lattice_constant_A": a_root, "bulk_modulus_GPa": b}))


BASELINES = {"memorised": memorised, "blind": blind, "wide_grid": wide_grid, "random": random_points,
             "pressure": pressure_guided}  # fmt: skip
#: successes out of the 11 crystals and mean score (docs/materials.md, the lab's docstring);
#: exact: the lab is deterministic and the random baseline seeded
REFERENCE_FIGURES = {"memorised": (0, 0.00), "blind": (0, 0.00), "wide_grid": (7, 0.68),
                     "random": (0, 0.05), "pressure": (11, 1.00)}  # fmt: skip


def run_baseline(task, name: str) -> tuple[int, float]:
    successes, scores = 0, []
    for k, crystal in enumerate(CRYSTALS):
        batch = CampaignBatch(task, 1)
        hidden = draw_scales(np.random.default_rng(1000 + k))  # the campaign's material
        (campaign,) = batch.reset([0], [k], conditions=[task.conditions_of(crystal, **hidden)])
        rng = np.random.default_rng(k)

        def step(proposal, batch=batch):
            (record,) = batch.step([0], [proposal])
            return record

        BASELINES[name](crystal, step, rng)
        assert campaign.done and campaign.history[-1].kind == "answer"
        assert campaign.experiments <= task.budget
        scores.append(campaign.history[-1].score)
        successes += task.success(campaign.history, campaign.conditions)
    return successes, float(np.mean(scores))


@pytest.mark.parametrize("name", list(BASELINES))
def test_baseline_reference_figures(task, name) -> None:
    """One campaign per crystal (budget 8), each on its drawn hidden material: the published
    table (v0's answers) and the closed-form guess alone never succeed; seven points over
    ±5 % of the guess fitted by the tool succeed on 7 (Al's and Ni3Al's E(V) leave the
    Birch-Murnaghan form; the length factor puts Ni's and Ni3Pt's a0 at the grid's edge); random
    lattice constants never; Newton steps on the pressure always."""
    successes, mean = run_baseline(task, name)
    expected_successes, expected_mean = REFERENCE_FIGURES[name]
    assert successes == expected_successes and mean == pytest.approx(expected_mean, abs=0.006)
