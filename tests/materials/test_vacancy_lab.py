"""VacancyFormation-v1: the physics (finite-size convergence, ASE's FIRE on the same cells,
the shipped reference), what a measurement reports, the hidden material (scaled exactly; the
memorised v0 answers fail), scoring and success, invalid input and the scripted baselines
(the lab's contract is checked for every registered lab in tests/core/test_check_lab.py).

Tolerances (named once, here):

- against ASE's EMT (``asap_cutoff=True``) relaxed with ASE's FIRE (and ``UnitCellFilter``
  for a relaxed cell) on the same cell, both to fmax = 1e-4 eV/Å: the two stop at
  different points below fmax, which moves the energy by about N fmax^2 / k ~ 1e-7 eV;
  asserted at 2e-6 eV (ASE's EMT evaluates the same float64 closed form, 1e-11 eV/atom);
- the shipped dilute-limit references against a recomputation: written to 6 decimals, so
  1e-6 eV; the two cell modes extrapolate to the same value within 1e-5 eV (measured 3e-6);
- a campaign at hidden factors against the named metal's measurement at the corresponding
  force tolerance: the same relaxation, its numbers multiplied by the factors, so 1e-12
  relative (one or two roundings of a float64 product).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import labtwin
from labtwin import Answer
from labtwin.campaign import CampaignBatch
from labtwin.simulators.materials.vacancy import (
    VacancyProtocol,
    bulk_reference,
    converged_formation_energy,
    measure_vacancies,
    vacancy_cell,
)
from labtwin.tasks.materials_common import (
    draw_scales,
)
from labtwin.tasks.materials_vacancy import (
    COMPUTE_ALLOWANCE,
    ENERGY_TOLERANCE_EV,
    METALS,
    REFERENCE_EV,
    SUCCESS_SCORE,
    vacancy_score,
)

LAB = "VacancyFormation-v1"
ASE_EV = 2e-6
SHIPPED_EV = 1e-6
MODES_EV = 1e-5
SCALED_REL = 1e-12
RUN = {"repeats": 3, "fmax_eV_A": 1e-3, "max_steps": 500, "cell": "relaxed"}


@pytest.fixture(scope="module")
def task():
    return labtwin.load_task(LAB)


@pytest.mark.parametrize(
    "element, cell", [("Cu", "fixed"), ("Ni", "fixed"), ("Pt", "relaxed"), ("Au", "relaxed")]
)
def test_formation_energy_equals_ase_fire_on_the_same_cell(element, cell) -> None:
    """The 31-atom vacancy cell relaxed by ASE's FIRE with ASE's EMT gives the lab's E_v."""
    from ase.calculators.emt import EMT
    from ase.filters import UnitCellFilter
    from ase.optimize import FIRE

    (result,) = measure_vacancies([VacancyProtocol(element, 2, 1e-4, 2000, cell)])
    atoms = vacancy_cell(element, 2).to_ase()
    atoms.calc = EMT(asap_cutoff=True)
    unrelaxed = atoms.get_potential_energy()
    target = UnitCellFilter(atoms) if cell == "relaxed" else atoms
    assert FIRE(target, logfile=None).run(fmax=1e-4, steps=2000)
    _, e_bulk = bulk_reference(element)
    n = len(atoms)
    assert result.converged and result.n_atoms == n == 31
    assert result.unrelaxed_formation_energy_eV == pytest.approx(unrelaxed - n * e_bulk, abs=1e-9)
    ase_ev = atoms.get_potential_energy() - n * e_bulk
    assert result.formation_energy_eV == pytest.approx(ase_ev, abs=ASE_EV)


def test_bulk_reference_is_the_perfect_crystal(task) -> None:
    """e_bulk is (1/N) E(N) of the perfect supercell: E_v = E(N-1) - (N-1)/N E(N)."""
    from labtwin.simulators.materials.bulk import cubic_cell
    from labtwin.simulators.materials.emt_warp import emt_evaluate
    from labtwin.simulators.materials.structure import supercell

    a0, e_bulk = bulk_reference("Ag")
    perfect = supercell(cubic_cell("Ag", a0), 3)
    (energy,) = emt_evaluate([perfect], cutoff="asap").energy
    assert energy / len(perfect) == pytest.approx(e_bulk, abs=1e-12)
    assert abs(emt_evaluate([perfect], cutoff="asap").stress[0, :3]).max() < 1e-12  # P = 0


def test_formation_energy_converges_with_cell_size() -> None:
    """Relaxed to 1e-4 eV/Å, E_v approaches the dilute limit from above in fixed cells and
    from below in zero-pressure ones (Pt: the largest image interaction of the seven), the
    error falling with N; Cu's zero-pressure value is EMT's 1.22 eV (tests/materials
    test_emt_physics.py checks the ASE/asap3 engine's)."""
    protocols = [
        VacancyProtocol(metal, n, 1e-4, 2000, cell)
        for metal in ("Pt", "Cu")
        for cell in ("fixed", "relaxed")
        for n in (2, 3, 4)
    ]
    errors = np.array(
        [
            r.formation_energy_eV - REFERENCE_EV[r.protocol.element]
            for r in measure_vacancies(protocols)
        ]
    ).reshape(2, 2, 3)
    assert np.all(errors[:, 0] > 0) and np.all(np.diff(errors[:, 0]) < 0)  # fixed: from above
    assert np.all(errors[0, 1] < 0) and np.all(np.diff(errors[0, 1]) > 0)  # relaxed Pt: below
    assert np.all(np.abs(errors[:, :, -1]) < 0.003)
    assert abs(errors[0, 0, 0]) > 0.01  # a 32-site fixed Pt cell is 16 meV off
    assert REFERENCE_EV["Cu"] == pytest.approx(1.22, abs=0.005)


def test_a_measurement_reports_its_convergence(task) -> None:
    cut, done, unrelaxed = task.measure(
        [
            {**RUN, "fmax_eV_A": 1e-4, "max_steps": 10},
            {**RUN, "fmax_eV_A": 1e-4},
            {**RUN, "max_steps": 0},
        ],
        conditions=task.conditions_of("Au"),
    )
    assert cut.ok and cut["converged"] == 0 and cut["relax_steps"] == 10
    assert cut["max_force_eV_A"] > 1e-4
    assert done["converged"] == 1 and done["max_force_eV_A"] < 1e-4 and done["relax_steps"] > 10
    assert abs(done["pressure_GPa"]) < 0.01
    assert unrelaxed["relax_steps"] == 0 and unrelaxed["converged"] == 0
    # (the relaxation maps positions through its cell coordinates: round-off, 1e-13 eV)
    assert unrelaxed["vacancy_formation_energy_eV"] == pytest.approx(
        unrelaxed["unrelaxed_formation_energy_eV"], abs=1e-9
    )
    assert done["unrelaxed_formation_energy_eV"] == unrelaxed["unrelaxed_formation_energy_eV"]
    # relaxation lowers E_v; a relaxation cut short leaves it in between
    assert (
        done["vacancy_formation_energy_eV"]
        < cut["vacancy_formation_energy_eV"]
        < unrelaxed["vacancy_formation_energy_eV"]
    )
    for m in (cut, done, unrelaxed):
        assert m["n_atoms"] == 107
        assert m.cost == pytest.approx(107 * (m["relax_steps"] + 1) / 1000)
        assert m.artifacts["structure_positions"].shape == (107, 3)
        assert all(v.uncertainty == 0 for v in m.observables.values())


def test_batched_protocols_read_as_if_alone() -> None:
    """Different metals, sizes, tolerances, step limits and cell modes in one batch give
    each protocol's result alone, to the last bit."""
    protocols = [
        VacancyProtocol("Cu", 2, 1e-3, 500, "fixed"),
        VacancyProtocol("Pt", 3, 1e-2, 25, "relaxed"),
        VacancyProtocol("Al", 2, 0.5, 500, "relaxed"),
        VacancyProtocol("Ni", 2, 1e-4, 0, "fixed"),
    ]
    together = measure_vacancies(protocols)
    for p, r in zip(protocols, together):
        (alone,) = measure_vacancies([p])
        assert alone.formation_energy_eV == r.formation_energy_eV
        assert (alone.relax_steps, alone.max_force_eV_A) == (r.relax_steps, r.max_force_eV_A)
        assert np.array_equal(alone.structure.positions, r.structure.positions)
    assert together[1].relax_steps == 25 and not together[1].converged  # its own step limit


@pytest.mark.parametrize("cell", ["fixed", "relaxed"])
def test_a_campaign_measures_the_named_metal_scaled_exactly(task, cell) -> None:
    """Corresponding states: at hidden factors (1.03, 0.85) a protocol at fmax f reads the
    named metal's protocol at f * 1.03 / 0.85 (forces scale as energy over length), with
    formation energies times 0.85, the residual force times 0.85 / 1.03, the pressure times
    0.85 / 1.03^3 and the relaxed cell's positions and cell times 1.03; steps, convergence,
    atoms and cost are the named metal's, and the reference E_v scales as the energies."""
    length, energy = 1.03, 0.85
    scaled = task.conditions_of("Pt", length, energy)
    plain = task.conditions_of("Pt")
    f = 1e-3
    run = {"repeats": 2, "fmax_eV_A": f, "max_steps": 500, "cell": cell}
    (m,) = task.measure([run], conditions=scaled)
    (ref,) = task.measure([{**run, "fmax_eV_A": f * length / energy}], conditions=plain)
    for name in ("vacancy_formation_energy_eV", "unrelaxed_formation_energy_eV"):
        assert m[name] == pytest.approx(energy * ref[name], rel=SCALED_REL)
    assert m["max_force_eV_A"] == pytest.approx(
        energy / length * ref["max_force_eV_A"], rel=SCALED_REL
    )
    assert m["pressure_GPa"] == pytest.approx(
        energy / length**3 * ref["pressure_GPa"], rel=SCALED_REL
    )
    for name in ("structure_positions", "structure_cell"):
        assert m.artifacts[name] == pytest.approx(
            length * np.asarray(ref.artifacts[name]), rel=SCALED_REL
        )
    assert np.array_equal(m.artifacts["structure_numbers"], ref.artifacts["structure_numbers"])
    for name in ("relax_steps", "converged", "n_atoms"):
        assert m[name] == ref[name]
    assert m.cost == ref.cost and m["converged"] == 1 and m["max_force_eV_A"] < f
    assert scaled["reference_formation_energy_eV"] == pytest.approx(
        energy * REFERENCE_EV["Pt"], rel=1e-15
    )


def test_sampled_campaigns_draw_the_metal_as_v0(task) -> None:
    """The metal is drawn as in v0 (the first draw of its generator), the factors after it
    (tests/materials/test_hidden_materials.py); the nominal campaign is the named metal."""
    for seed in range(50):
        c = task.sample_conditions(np.random.default_rng(seed))
        assert c["metal"] == METALS[int(np.random.default_rng(seed).integers(len(METALS)))]
    assert task.nominal_conditions() == task.conditions_of("Cu")
    assert task.nominal_conditions()["reference_formation_energy_eV"] == REFERENCE_EV["Cu"]


#: the memorised answer's successes allowed on 200 sampled campaigns: 3 %, three times the
#: chance of a lucky energy factor (test_the_memorised_table_answer_fails_on_hidden_materials)
MEMORISED_SUCCESSES = 6


def test_the_memorised_table_answer_fails_on_hidden_materials(task) -> None:
    """The v0 exploit: answering the named metal's REFERENCE_EV with no experiment (no
    compute, so the compute factor is 1) scored 1 on every campaign. On hidden materials the
    reference is REFERENCE_EV times the energy factor (0.8-1.2, uniform), so the table misses
    by up to 20 % of E_v (146-379 meV) against a 2 meV tolerance: a success needs the factor
    within 2 meV / E_v of 1 (±0.0011 for Ni to ±0.0027 for Au), a chance of 0.01 eV / E_v
    (0.5-1.4 %, 1.0 % over the seven metals, 2 of 200 expected; the mean score, 0.0125 eV /
    E_v, 1.25 %). Measured: 2 successes, mean score 0.012. Asserted: at most 3 %
    (MEMORISED_SUCCESSES of 200) and a mean score under 0.03."""
    scores = []
    for seed in range(200):
        conditions = task.sample_conditions(np.random.default_rng(seed))
        table = REFERENCE_EV[conditions["metal"]]
        answer = task.parse_answer({"vacancy_formation_energy_eV": table})
        scores.append(task.score_answer(answer, conditions, []))
    successes = sum(score >= SUCCESS_SCORE for score in scores)
    assert successes <= MEMORISED_SUCCESSES and np.mean(scores) < 0.03
    for metal in METALS:  # what v0 measured: the table answer is exact
        answer = task.parse_answer({"vacancy_formation_energy_eV": REFERENCE_EV[metal]})
        assert task.score_answer(answer, task.conditions_of(metal), []) == 1.0


def test_score_formula() -> None:
    assert vacancy_score(1.0, 1.0, COMPUTE_ALLOWANCE) == 1.0
    assert vacancy_score(1.0 + ENERGY_TOLERANCE_EV, 1.0, 1.0) == pytest.approx(SUCCESS_SCORE)
    assert vacancy_score(1.0, 1.0, 2 * COMPUTE_ALLOWANCE) == pytest.approx(0.5)
    assert vacancy_score(1.01, 1.0, 1.0) < 1e-5


def _campaign(task, metal: str, runs: list[dict], answer: float):
    batch = CampaignBatch(task, 1)
    (campaign,) = batch.reset([0], [0], conditions=[task.conditions_of(metal)])
    for run in runs:
        batch.step([0], [run])
    (record,) = batch.step([0], [Answer({"vacancy_formation_energy_eV": answer})])
    assert record.kind == "answer" and campaign.done
    return record.score, task.success(campaign.history, campaign.conditions), campaign


def test_hand_built_answers_succeed_or_fail_by_tolerance_and_compute(task) -> None:
    ref = REFERENCE_EV["Pd"]
    score, success, _ = _campaign(task, "Pd", [RUN], ref + 0.001)
    assert score == pytest.approx(math.exp(-0.125)) and success
    score, success, _ = _campaign(task, "Pd", [RUN], ref + 0.003)
    assert score < SUCCESS_SCORE and not success
    # the exact value after a brute-force protocol that spends far beyond the allowance
    brute = {**RUN, "repeats": 5, "fmax_eV_A": 1e-4}
    score, success, campaign = _campaign(task, "Pd", [brute], ref)
    assert campaign.cost > 1.6 * COMPUTE_ALLOWANCE and not success
    assert score == pytest.approx(COMPUTE_ALLOWANCE / campaign.cost, rel=0.01)


@pytest.mark.parametrize(
    "bad, where",
    [
        ({**RUN, "repeats": 1}, "repeats"),
        ({**RUN, "repeats": 8}, "repeats"),
        ({**RUN, "repeats": 3.5}, "repeats"),
        ({**RUN, "fmax_eV_A": 0.0}, "fmax_eV_A"),
        ({**RUN, "fmax_eV_A": float("nan")}, "fmax_eV_A"),
        ({**RUN, "max_steps": -1}, "max_steps"),
        ({**RUN, "max_steps": 10**9}, "max_steps"),
        ({**RUN, "cell": "npt"}, "cell"),
        ({**RUN, "vacancy_formation_energy_eV": 1.2}, "vacancy_formation_energy_eV"),
        ({k: v for k, v in RUN.items() if k != "cell"}, "cell"),
        ("a big cell please", "JSON"),
    ],
)
def test_hostile_input_is_invalid_with_a_reason(task, bad, where) -> None:
    (m,) = task.measure([bad])
    assert m.status == "invalid" and where in m.reason and len(m.reason) < 500


def test_bad_answers_are_invalid_and_the_campaign_goes_on(task) -> None:
    batch = CampaignBatch(task, 1)
    (campaign,) = batch.reset([0], [0])
    for answer in ({"vacancy_formation_energy_eV": -1.0}, {"vacancy_formation_energy_eV": "one"},
                   {}, {"vacancy_formation_energy_eV": float("nan")}):  # fmt: skip
        (record,) = batch.step([0], [Answer(answer)])
        assert record.measurement.status == "invalid" and record.score == 0.0
    assert not campaign.done


def test_no_impossible_variant() -> None:
    with pytest.raises(ValueError, match="no impossible variant"):
        labtwin.load_task(LAB, impossible=True)


@pytest.mark.slow
def test_shipped_references_recompute() -> None:
    """The dilute-limit references in the lab equal a fresh computation (fixed-volume 6^3
    and 7^3 cells, 1e-4 eV/Å, extrapolated in 1/N); zero-pressure cells extrapolate to the
    same value (Pt and Au, the largest image interactions)."""
    for metal in METALS:
        assert converged_formation_energy(metal) == pytest.approx(
            REFERENCE_EV[metal], abs=SHIPPED_EV
        )
    for metal in ("Pt", "Au"):
        relaxed = converged_formation_energy(metal, "relaxed")
        assert relaxed == pytest.approx(REFERENCE_EV[metal], abs=MODES_EV)


# ---- scripted baselines (the lab's reference figures) ------------------------------------


def largest_cell(metal, step, rng):
    """The brute-force protocol: the largest zero-pressure cell relaxed tightly."""
    m = step({"repeats": 5, "fmax_eV_A": 1e-4, "max_steps": 1000, "cell": "relaxed"}).measurement
    return m["vacancy_formation_energy_eV"]


def smallest_cell(metal, step, rng):
    m = step({"repeats": 2, "fmax_eV_A": 1e-2, "max_steps": 1000, "cell": "fixed"}).measurement
    return m["vacancy_formation_energy_eV"]


def extrapolated(metal, step, rng):
    """Zero-pressure cells of 3^3 and 4^3 relaxed to 1e-3 eV/Å, E_v extrapolated in 1/N."""
    readings = [
        step({"repeats": n, "fmax_eV_A": 1e-3, "max_steps": 1000, "cell": "relaxed"}).measurement
        for n in (3, 4)
    ]
    (e3, n3), (e4, n4) = ((m["vacancy_formation_energy_eV"], m["n_atoms"] + 1) for m in readings)
    return (e4 * n4 - e3 * n3) / (n4 - n3)


def random_protocols(metal, step, rng):
    """Three random protocols; the answer is the largest converged cell's reading."""
    readings = [step(_random_run(rng)).measurement for _ in range(3)]
    converged = [m for m in readings if m.ok and m["converged"] == 1] or readings
    return max(converged, key=lambda m: m["n_atoms"])["vacancy_formation_energy_eV"]


def _random_run(rng) -> dict:
    return {
        "repeats": int(rng.integers(2, 6)),
        "fmax_eV_A": float(10 ** rng.uniform(-4, 0)),
        "max_steps": int(rng.integers(0, 1001)),
        "cell": ["fixed", "relaxed"][int(rng.integers(2))],
    }


BASELINES = {"largest": largest_cell, "smallest": smallest_cell,
             "extrapolated": extrapolated, "random": random_protocols}  # fmt: skip
#: successes out of the 7 metals and mean score (docs/materials.md, the lab's docstring);
#: exact: the lab is deterministic and the random baseline and hidden factors seeded (v0,
#: the named metals themselves: largest (2, 0.525), smallest (0, 0.076), the others the same)
REFERENCE_FIGURES = {"largest": (2, 0.536), "smallest": (0, 0.099), "extrapolated": (7, 0.998),
                     "random": (3, 0.424)}  # fmt: skip
#: baselines that relax 500-atom cells run in the slow suite (about 14 s together)
SLOW_BASELINES = {"largest", "extrapolated", "random"}


def run_baseline(task, name: str) -> tuple[int, float]:
    """Each baseline over one campaign per metal, each on its drawn hidden material (the
    baselines' fmax knobs are in that material's units)."""
    successes, scores = 0, []
    for k, metal in enumerate(METALS):
        batch = CampaignBatch(task, 1)
        hidden = draw_scales(np.random.default_rng(1000 + k))  # the campaign's material
        (campaign,) = batch.reset([0], [k], conditions=[task.conditions_of(metal, **hidden)])
        rng = np.random.default_rng(k)

        def step(proposal, batch=batch):
            (record,) = batch.step([0], [proposal])
            return record

        answer = BASELINES[name](metal, step, rng)
        step(Answer({"vacancy_formation_energy_eV": float(np.clip(answer, 0, 5))}))
        assert campaign.done and campaign.history[-1].kind == "answer"
        scores.append(campaign.history[-1].score)
        successes += task.success(campaign.history, campaign.conditions)
    return successes, float(np.mean(scores))


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_BASELINES else n for n in BASELINES],
)
def test_baseline_reference_figures(task, name) -> None:
    """One campaign per metal, each on its drawn hidden material: the brute-force cell is
    accurate but overspends the allowance for five metals; the smallest cell is cheap and
    always too far off (its finite-size error scales with the energy factor: Cu at 0.81 is
    3.5 meV off instead of 4.4); two zero-pressure cells extrapolated in 1/N always succeed;
    random protocols sometimes."""
    successes, mean = run_baseline(task, name)
    expected_successes, expected_mean = REFERENCE_FIGURES[name]
    assert successes == expected_successes and mean == pytest.approx(expected_mean, abs=0.001)
