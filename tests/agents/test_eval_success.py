"""Every lab's success predicate, on hand-built campaigns, at the edges of its tolerance.

Each campaign is a list of records made the way the engine makes them: a measurement that
holds every observable the lab declares, scored by ``labtwin.campaign.score_of`` (the
engine's scoring, repeats pooled) against the campaign's conditions; where the lab confirms,
the last record carries the closing confirmation and its score. Each lab gets a campaign just
inside its documented tolerance (a success), one just outside (none) and, where it confirms,
one whose best reading passes but whose confirmation does not (none).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import labtwin
from labtwin.campaign import Record, score_of
from labtwin.measurement import Measurement, Value
from labtwin.registry import short_id

Step = tuple[str, dict[str, float], dict[str, Any]]  # kind, observable values, experiment


def reading(
    task: labtwin.Task, values: dict[str, float], experiment: dict[str, Any]
) -> Measurement:
    """An ``ok`` measurement of every declared observable (the given values, 0 elsewhere);
    a value may be ``(value, uncertainty)``; ``_cost`` is its cost (default 1)."""
    values = dict(values)
    cost = float(values.pop("_cost", 1.0))
    observables = {}
    for spec in task.observables:
        value = values.get(spec.name, 0.0)
        value, error = value if isinstance(value, tuple) else (value, 0.0)
        observables[spec.name] = Value(float(value), spec.unit, float(error))
    return Measurement("ok", observables, cost=cost, experiment=dict(experiment))


def campaign(
    task: labtwin.Task,
    conditions: dict[str, Any],
    steps: list[Step],
    confirmation: dict[str, float] | None = None,
) -> list[Record]:
    records: list[Record] = []
    history: list[Measurement] = []
    for kind, values, experiment in steps:
        if kind == "answer":
            m = Measurement("ok", experiment=dict(experiment))
        else:
            m = reading(task, values, experiment)
        score = score_of(task, kind, m, conditions, list(history))
        records.append(Record(0, len(records), kind, m, score, 0.0, proposal=experiment))
        if kind == "experiment":
            history.append(m)
    if confirmation is not None:
        assert task.confirms_best, f"{task.id} does not confirm"
        best = max((r for r in records if r.kind == "experiment"), key=lambda r: r.score)
        m = reading(task, confirmation, best.measurement.experiment)
        records[-1].confirmation = m
        records[-1].confirmed_score = task.score(m, conditions)
    return records


def exp(i: int, **extra: Any) -> dict[str, Any]:
    return {"run": i, **extra}


# ---- one case per lab: (task, conditions, passing campaign, failing campaigns) -----------


def reactor(task_id: str):
    task = labtwin.load_task(task_id)
    c = task.nominal_conditions()
    t = task.success_threshold  # a measured yield of B of 0.85
    ok = campaign(task, c, [("experiment", {"yield_B": 0.5}, exp(0)), ("experiment", {"yield_B": t + 0.01}, exp(1))], {"yield_B": t + 0.005})  # fmt: skip
    low = campaign(task, c, [("experiment", {"yield_B": t - 0.01}, exp(0))], {"yield_B": t - 0.01})
    lucky = campaign(task, c, [("experiment", {"yield_B": 0.95}, exp(0))], {"yield_B": t - 0.05})
    return task, c, ok, [low, lucky]


def arrhenius():
    task = labtwin.load_task("ArrheniusFit-v1")
    c = task.sample_conditions(np.random.default_rng(3))
    truth = c["activation_energies"][0] / 1e3
    # exp(-|error| / 5 kJ/mol) >= 0.8: within 5 ln 1.25 = 1.116 kJ/mol
    run = ("experiment", {"conversion_A": 0.5}, {"temperature_K": 340.0, "time_min": 30.0})
    ok = campaign(task, c, [run, ("answer", {}, {"activation_energy_kJ_mol": truth + 1.0})])
    off = campaign(task, c, [run, ("answer", {}, {"activation_energy_kJ_mol": truth - 1.25})])
    runs_only = campaign(task, c, [run, run])
    return task, c, ok, [off, runs_only]


def equation_of_state():
    task = labtwin.load_task("LJEquationOfState-v2")
    c = task.nominal_conditions()
    p, temperature = c["target_pressure"], c["temperature"]
    tol = 0.05 + 0.05 * abs(p)  # the closeness kernel's width
    # closeness >= 0.75 with no error bar: |P - P_target| <= tol * sqrt(2 ln(4/3)) = 0.7585 tol
    on = {"temperature": temperature, "density": c["target_density"], "production_steps": 1000}
    ok = campaign(task, c, [("experiment", {"pressure": p + 0.7 * tol}, on)])
    off = campaign(task, c, [("experiment", {"pressure": p + 0.8 * tol}, on)])
    # right pressure, off the isotherm by 2 tolerances of T (0.05 each): exp(-2) < 0.75
    hot = campaign(
        task, c, [("experiment", {"pressure": p}, {**on, "temperature": temperature + 0.1})]
    )
    # a perfect density answer without a measured target pressure is paid but no success
    answer = campaign(task, c, [("experiment", {"pressure": p + 3 * tol}, on), ("answer", {}, {"density": c["target_density"]})])  # fmt: skip
    assert answer[-1].score == pytest.approx(1.0)
    return task, c, ok, [off, hot, answer]


def cluster(task_id: str):
    task = labtwin.load_task(task_id)
    c = task.nominal_conditions()
    e0, t = task.reference_minimum, task.success_threshold  # score = E / E_min
    ok = campaign(task, c, [("experiment", {"energy": 0.9 * e0}, exp(0)), ("experiment", {"energy": (t + 0.0005) * e0}, exp(1))])  # fmt: skip
    off = campaign(task, c, [("experiment", {"energy": (t - 0.0005) * e0}, exp(0))])
    return task, c, ok, [off]


def water():
    task = labtwin.load_task("WaterDensity-v2")
    c = task.nominal_conditions()
    target = c["target_density"]
    # tolerance 0.01 g/cm^3, error bar 0.008: score 0.78 exp(-d^2 / (2 * 0.0128^2)) >= 0.6
    # for d <= 0.0093 g/cm^3
    near = {"density": (target + 0.004, 0.008)}
    far = {"density": (target + 0.012, 0.008)}
    ok = campaign(task, c, [("experiment", near, exp(0))], near)
    off = campaign(task, c, [("experiment", far, exp(0))], far)
    # on target but with an error bar above 1.33 tolerances: tol / s < 0.6, no success
    vague = {"density": (target, 0.014)}
    imprecise = campaign(task, c, [("experiment", vague, exp(0))], vague)
    lucky = campaign(task, c, [("experiment", near, exp(0))], far)
    return task, c, ok, [off, imprecise, lucky]


def molecule():
    from labtwin.tasks.chem_design import criteria

    task = labtwin.load_task("MoleculeDesign-v2")
    c = task.nominal_conditions()
    inside = {name: (low + high) / 2 for name, low, high in criteria(c)}
    values = {**inside, "structural_alerts": 0.0, "xtb_measured": 1.0}
    ok = campaign(task, c, [("experiment", values, {"smiles": "CCO", "kind": "xtb"})], values)
    name, low, high = criteria(c)[0]
    outside = {**values, name: high + 0.05 * (high - low)}  # one criterion just missed
    off = campaign(task, c, [("experiment", outside, {"smiles": "CCN", "kind": "xtb"})], outside)
    alert = {**values, "structural_alerts": 1.0}
    flagged = campaign(task, c, [("experiment", alert, {"smiles": "CCS", "kind": "xtb"})], alert)
    return task, c, ok, [off, flagged]


def ignition():
    task = labtwin.load_task("IgnitionDelay-v1")
    c = task.nominal_conditions()
    target = c["target_delay_ms"]
    # exp(-(ln(delay / target) / 0.15)^2 / 2) >= exp(-1/2): within one error bar, 15 % in ln
    near = {"ignition_delay_ms": target * math.exp(0.14)}
    far = {"ignition_delay_ms": target * math.exp(-0.16)}
    ok = campaign(task, c, [("experiment", near, exp(0))], near)
    off = campaign(task, c, [("experiment", far, exp(0))], far)
    lucky = campaign(task, c, [("experiment", near, exp(0))], far)
    return task, c, ok, [off, lucky]


def alloy():
    task = labtwin.load_task("AlloyDesign-v2")
    c = {"target_lattice_constant_A": 3.70, "witness": "hand-built"}
    # stable (on the hull, E_f <= -20 meV/atom) and a lattice constant outside target
    # +- 0.02 A by d: exp(-(d / 0.02 A)^2 / 2) >= 0.9 for d <= 0.0092 A
    stable = {"e_above_hull_eV_atom": 0.0, "formation_energy_eV_atom": -0.03}
    ok = campaign(task, c, [("experiment", {**stable, "lattice_constant_A": 3.725}, exp(0))])
    off = campaign(task, c, [("experiment", {**stable, "lattice_constant_A": 3.735}, exp(0))])
    above_hull = {**stable, "e_above_hull_eV_atom": 0.001, "lattice_constant_A": 3.70}
    unstable = campaign(task, c, [("experiment", above_hull, exp(0))])  # exp(-1/5) < 0.9
    return task, c, ok, [off, unstable]


def synthesis():
    task = labtwin.load_task("SynthesisPlanning-v1")
    c = {"target": "CCO", "route": [], "target_heavy_atoms": 3.0, "target_molecular_weight": 46.07}
    route = {"route_yield": 0.6, "route_cost": 80.0, "step_yield": 0.6, "route_steps": 2.0}
    made = {**route, "exact_match": 1.0, "tanimoto_to_target": 1.0}
    close = {**route, "exact_match": 0.0, "tanimoto_to_target": 0.99}
    ok = campaign(task, c, [("experiment", close, exp(0)), ("experiment", made, exp(1))])
    near_miss = campaign(task, c, [("experiment", close, exp(0))])
    return task, c, ok, [near_miss]


def lattice():
    task = labtwin.load_task("LatticeConstant-v1")
    c = {"crystal": "Cu", "crystal_index": 1, "reference_lattice_constant_A": 3.59,
         "reference_bulk_modulus_GPa": 135.0}  # fmt: skip
    # exp(-(da / 0.002 A)^2 / 2 - (dB / (2 % of B0))^2 / 2) >= exp(-1/2): inside the ellipse
    run = ("experiment", {"pressure_GPa": 0.1}, {"lattice_constant_A": 3.6})

    def answer(f: float) -> Step:
        a, b = 3.59 + f * 0.002, 135.0 * (1 + f * 0.02)
        return ("answer", {}, {"lattice_constant_A": a, "bulk_modulus_GPa": b})

    ok = campaign(task, c, [run, answer(0.7)])  # 0.49 of the ellipse's e-fold
    off = campaign(task, c, [run, answer(0.72)])  # 0.518: just outside
    return task, c, ok, [off, campaign(task, c, [run])]


def vacancy():
    task = labtwin.load_task("VacancyFormation-v1")
    c = task.conditions_of("Cu")
    e_v = c["reference_formation_energy_eV"]
    # within 2 meV (one tolerance), and no more than 30 k atom-evaluations spent before it
    cheap = ("experiment", {"vacancy_formation_energy_eV": e_v, "_cost": 10.0}, exp(0))
    dear = ("experiment", {"vacancy_formation_energy_eV": e_v, "_cost": 60.0}, exp(1))
    ok = campaign(task, c, [cheap, ("answer", {}, {"vacancy_formation_energy_eV": e_v + 0.0019})])
    off = campaign(task, c, [cheap, ("answer", {}, {"vacancy_formation_energy_eV": e_v + 0.0021})])
    costly = campaign(task, c, [dear, ("answer", {}, {"vacancy_formation_energy_eV": e_v})])
    return task, c, ok, [off, costly]


def surface():
    task = labtwin.load_task("SurfaceEnergy-v1")
    c = task.conditions_of("Pt", (1, 1, 0))
    g = c["reference_surface_energy_J_m2"]
    # within 0.5 mJ/m^2 (one tolerance), and no more than 2 k atom-evaluations spent before it
    cheap = ("experiment", {"surface_energy_J_m2": g, "_cost": 1.0}, exp(0))
    dear = ("experiment", {"surface_energy_J_m2": g, "_cost": 4.0}, exp(1))
    ok = campaign(task, c, [cheap, ("answer", {}, {"surface_energy_J_m2": g + 0.00049})])
    off = campaign(task, c, [cheap, ("answer", {}, {"surface_energy_J_m2": g + 0.00051})])
    costly = campaign(task, c, [dear, ("answer", {}, {"surface_energy_J_m2": g})])
    return task, c, ok, [off, costly]


CASES: dict[str, Callable] = {
    "LatticeConstant-v1": lattice,
    "VacancyFormation-v1": vacancy,
    "SurfaceEnergy-v1": surface,
    "BatchReactor-v1": lambda: reactor("BatchReactor-v1"),
    "ReactorProtocol-v1": lambda: reactor("ReactorProtocol-v1"),
    "ArrheniusFit-v1": arrhenius,
    "LJEquationOfState-v2": equation_of_state,
    "LJClusterAnneal-v0": lambda: cluster("LJClusterAnneal-v0"),
    "LJ38ClusterAnneal-v0": lambda: cluster("LJ38ClusterAnneal-v0"),
    "WaterDensity-v2": water,
    "MoleculeDesign-v2": molecule,
    "IgnitionDelay-v1": ignition,
    "AlloyDesign-v2": alloy,
    "SynthesisPlanning-v1": synthesis,
}


def test_every_registered_lab_documents_a_predicate() -> None:
    from labtwin.agents.evaluation.driver import has_success_predicate

    for task_id in labtwin.list_tasks():
        task = labtwin.load_task(task_id)
        assert has_success_predicate(task), task_id
        text = f"{type(task).__doc__}\n{type(task).reward_description}"
        assert "success" in text.lower(), f"{task_id} does not document its success predicate"


def scored(kind: str, score: float, confirmed: float | None = None) -> list[Record]:
    """A one-step campaign with a given score (and confirmation)."""
    record = Record(0, 0, kind, Measurement("ok"), score, 0.0)
    if confirmed is not None:
        record.confirmation, record.confirmed_score = Measurement("ok"), confirmed
    return [record]


def test_labs_without_a_hand_built_case_keep_their_threshold() -> None:
    """A lab registered after these cases were written is checked at its threshold through
    its own ``success``: a score at the threshold succeeds, one just below does not, and a
    confirmation below it takes the success back. A lab with a predicate of its own needs a
    hand-built case in ``CASES``."""
    for task_id in labtwin.list_tasks():
        if short_id(task_id) in CASES:
            continue
        task = labtwin.load_task(task_id)
        assert type(task).success is labtwin.Task.success, f"{task_id}: add a case to CASES"
        kind = "answer" if task.answer_model is not None else "experiment"
        t = task.success_threshold
        assert task.success(scored(kind, t), {}), task_id
        assert not task.success(scored(kind, t - 1e-6), {}), task_id
        if task.confirms_best:
            assert not task.success(scored(kind, t + 0.01, t - 0.01), {}), task_id


@pytest.mark.parametrize("lab", sorted(CASES))
def test_success_at_the_edges_of_the_tolerance(lab: str) -> None:
    task, conditions, passing, failing = CASES[lab]()
    assert task.success(passing, conditions), f"{lab}: the passing campaign should succeed"
    for n, records in enumerate(failing):
        assert not task.success(records, conditions), f"{lab}: failing campaign {n} succeeded"
    # success is not the shaped reward: the failing campaigns' best scores may be high
    if task.success_threshold is not None:
        best = max(r.score for r in passing if r.score is not None)
        assert best >= task.success_threshold


def test_the_docs_table_states_each_labs_threshold() -> None:
    """docs/evaluation.md's table of predicates says what the labs' code says."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "evaluation.md").read_text()
    for lab in CASES:
        rows = [line for line in text.splitlines() if line.startswith(f"| {lab} |")]
        assert len(rows) == 1, f"docs/evaluation.md: no row (or several) for {lab}"
        task = labtwin.load_task(lab)
        if task.success_threshold is None:
            assert "its own predicate" in rows[0]
            continue
        assert f">= {task.success_threshold:.3g}" in rows[0], (lab, rows[0])
        assert ("confirmed" in rows[0]) == task.confirms_best, (lab, rows[0])
