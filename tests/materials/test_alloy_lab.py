"""AlloyDesign-v2: the lab contract, its measurements against ASE's FIRE and EMT, targets,
failures and hacks (the reference hull itself: test_alloy_hull.py).

Tolerances of the batched Warp engine against ASE (FIRE with a UnitCellFilter on ASE's EMT,
asap cutoff), both relaxed to fmax = 1e-4 eV/Å: the two stop at different points below
fmax, which leaves an energy error of order N fmax^2 / k (1e-8 eV for k ~ 1 eV/Å^2) and a
residual stress of fmax N / V (8e-6 eV/Å^3), a relative volume error of stress / B
(1e-5), so lattice constants within 5e-5 Å and B (fitted on the slightly different cells)
within 1e-5 relative; energies, formation energies and hull distances within 1e-8 eV/atom
(measured: 5e-10 eV/atom, 1.3e-5 Å, 5e-6 relative).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import labtwin
from labtwin.runner import run_campaigns
from labtwin.simulators.materials.alloy import AlloySpec, measure_alloys
from labtwin.simulators.materials.eos import fit_equations_of_state
from labtwin.simulators.materials.relax import relax_many
from labtwin.tasks.materials_alloy import (
    IMPOSSIBLE_TARGET_A,
    PAIRS,
    SUCCESS_SCORE,
    TARGET_OFFSET_A,
    alloy_score,
    witnesses,
)
from labtwin.testing import check_lab

CU3PD = {
    "pair": "Cu-Pd",
    "lattice": "fcc",
    "ordering": "ordered",
    "fraction_B": 0.25,
    "repeats": 2,
    "ordering_seed": 0,
}


@pytest.fixture(scope="module")
def task():
    return labtwin.load_task("AlloyDesign-v2")


def test_check_lab_passes() -> None:
    assert "calibration" in check_lab("AlloyDesign-v2")


def test_a_known_ordered_alloy_measures_as_the_reference_hull_says(task) -> None:
    """L1_2 Cu3Pd in a 32-atom supercell: on the hull (E_hull within SAME_ENERGY_EV of 0),
    lattice constant as its composition's reference cell (L1_2 in the 108-atom supercell, a
    witness) to 2.5e-3 Å (both relaxed to 0.01 eV/Å, each lattice constant within 1.1e-3 Å
    of the fixed point: the residual stress fmax N / V over B), between Cu's and Pd's
    (Vegard, EMT: 3.59 and 3.88 Å), bulk modulus between theirs."""
    (m,) = task.measure([CU3PD])
    assert m.ok, m.reason
    reference = next(w for w in witnesses(task.backend) if w.name.startswith("Cu-Pd Cu3Pd"))
    assert m["lattice_constant_A"] == pytest.approx(reference.lattice_constant_A, abs=2.5e-3)
    assert m["e_above_hull_eV_atom"] == pytest.approx(0.0, abs=SAME_ENERGY_EV)
    assert -0.04 < m["formation_energy_eV_atom"] < -0.02
    assert 3.59 < m["lattice_constant_A"] < 3.88
    assert 134 < m["bulk_modulus_GPa"] < 181
    assert m["fraction_B"] == 0.25
    assert m["volume_per_atom_A3"] == pytest.approx(m["lattice_constant_A"] ** 3 / 4, rel=1e-12)
    assert all(v.uncertainty == 0 for v in m.observables.values())  # deterministic: no error bar
    # cost: 32 atoms times (relaxation steps + 1 + 7 EOS points), in thousands
    assert m.cost == pytest.approx(32 * (m.provenance["relax_steps"] + 8) / 1000)
    assert m.artifacts["structure_positions"].shape == (32, 3)
    assert m.artifacts["structure_cell"].shape == (3, 3)
    assert sorted(set(m.artifacts["structure_numbers"])) == [29, 46]
    assert "emt_warp" in m.provenance["simulator"] and "warp-lang" in m.provenance["versions"]


ENERGY_EV_ATOM = 1e-8
#: energies of two relaxed cells compared within this (eV/atom): each relaxation stops
#: below fmax = 0.01 eV/Å, an energy error of order 1e-5 eV/atom (module doc)
SAME_ENERGY_EV = 1e-4
LATTICE_A = 5e-5
BULK_MODULUS_REL = 1e-5


def test_batched_relaxations_match_ase_fire_on_the_same_cells() -> None:
    """An ordered fcc and a random hcp Cu-Pd cell relaxed (atoms and cell) by the batched
    engine and by ASE's FIRE on ASE's EMT, then their equations of state: the same energies,
    lattice constants and bulk moduli (module doc's tolerances)."""
    specs = [
        AlloySpec("Cu", "Pd", "fcc", 0.25, "ordered", 1),
        AlloySpec("Cu", "Pd", "hcp", 0.5, "random", 1, 1),
    ]
    cells = [s.build() for s in specs]
    warp = relax_many(cells, "warp", fmax=1e-4, max_steps=3000)
    ase = relax_many(cells, "ase", fmax=1e-4, max_steps=3000)
    eos_warp = fit_equations_of_state([r.structure for r in warp], "warp")
    eos_ase = fit_equations_of_state([r.structure for r in ase], "ase")
    for w, a, ew, ea in zip(warp, ase, eos_warp, eos_ase, strict=True):
        assert w.converged and a.converged, (w.reason, a.reason)
        assert w.energy_per_atom_eV == pytest.approx(a.energy_per_atom_eV, abs=ENERGY_EV_ATOM)
        la, lw = ((4 * r.structure.volume_per_atom) ** (1 / 3) for r in (a, w))
        assert lw == pytest.approx(la, abs=LATTICE_A)
        assert ew.bulk_modulus_GPa == pytest.approx(ea.bulk_modulus_GPa, rel=BULK_MODULUS_REL)
    # one batch or one cell at a time: the same numbers to the last bit
    alone = relax_many(cells[1:], "warp", fmax=1e-4, max_steps=3000)[0]
    assert alone.energy_eV == warp[1].energy_eV and alone.n_steps == warp[1].n_steps


@pytest.mark.slow
def test_batched_measurements_match_ase_on_the_same_cells() -> None:
    """Whole measurements (relaxation, equation of state, elemental references and the
    reference hull, all on one engine) of ordered, random and hcp cells of two pairs: the
    batched engine's and ASE's agree (module doc's tolerances)."""
    specs = [
        AlloySpec("Cu", "Pd", "fcc", 0.25, "ordered", 2),
        AlloySpec("Cu", "Au", "fcc", 0.3, "random", 2, 3),
        AlloySpec("Cu", "Pd", "hcp", 0.5, "random", 1, 1),
    ]
    warp = measure_alloys(specs, "warp", fmax=1e-4, max_steps=3000)
    ase = measure_alloys(specs, "ase", fmax=1e-4, max_steps=3000)
    for w, a in zip(warp, ase, strict=True):
        assert w.status == a.status == "ok", (w.reason, a.reason)
        for name in ("energy_per_atom_eV", "formation_energy_eV_atom", "e_above_hull_eV_atom"):
            assert getattr(w, name) == pytest.approx(getattr(a, name), abs=ENERGY_EV_ATOM), name
        assert w.lattice_constant_A == pytest.approx(a.lattice_constant_A, abs=LATTICE_A)
        assert w.bulk_modulus_GPa == pytest.approx(a.bulk_modulus_GPa, rel=BULK_MODULUS_REL)


def test_every_witness_is_reachable_and_scores_a_success(task) -> None:
    """Each campaign's target is built around a witness; the experiment that builds the
    witness (its cell's knobs, as the reference table stores them) reads E_hull = 0 and
    scores at least the success threshold at the target farthest from it."""
    found = witnesses(task.backend)
    assert len(found) >= 3
    assert {w.pair for w in found} <= {"Cu-Pd", "Cu-Pt", "Ni-Pt"}
    experiments = [witness_experiment(w) for w in found]
    for w, m in zip(found, task.measure(experiments), strict=True):
        assert m.ok, m.reason
        assert m["e_above_hull_eV_atom"] == pytest.approx(0.0, abs=SAME_ENERGY_EV), w.name
        target = w.lattice_constant_A + TARGET_OFFSET_A
        assert task.reward(m, {"target_lattice_constant_A": target}) >= SUCCESS_SCORE, w.name


def witness_experiment(witness) -> dict:
    """The lab experiment that builds a witness's reference cell."""
    d = witness.reference.design
    return {
        "pair": witness.pair,
        "lattice": d["lattice"],
        "ordering": d["ordering"],
        "fraction_B": d["n_solute"] / d["n_atoms"],
        "repeats": d["repeats"],
        "ordering_seed": d["ordering_seed"],
    }


def test_pure_metals_and_unstable_alloys_score_nothing(task) -> None:
    pure, unstable = task.measure(
        [
            {**CU3PD, "fraction_B": 0.0},  # pure Cu
            {**CU3PD, "pair": "Cu-Ag", "ordering": "random", "fraction_B": 0.3},
        ]
    )
    assert pure.ok and unstable.ok
    # pure Cu against Cu's reference cell, both relaxed to fmax = 0.01 eV/Å: each may keep a
    # stress of fmax N / V (8.5e-4 eV/Å^3), an energy of V stress^2 / (2 B) = 5e-6 eV/atom
    assert pure["formation_energy_eV_atom"] == pytest.approx(0.0, abs=1e-5)
    assert unstable["formation_energy_eV_atom"] > 0.01  # Cu-Ag demixes, in EMT as in nature
    for m in (pure, unstable):
        assert task.reward(m, {"target_lattice_constant_A": m["lattice_constant_A"]}) < 1e-3


def test_score_formula() -> None:
    assert alloy_score(0.0, -0.02, 3.70, 3.70) == pytest.approx(1.0)
    assert alloy_score(0.005, -0.02, 3.70, 3.70) == pytest.approx(math.exp(-1))
    assert alloy_score(0.0, -0.01, 3.70, 3.70) == pytest.approx(0.5)
    assert alloy_score(0.0, -0.05, 3.74, 3.70) == pytest.approx(math.exp(-0.5))  # 0.02 outside
    assert alloy_score(0.0, +0.05, 3.70, 3.70) == 0.0


@pytest.mark.parametrize(
    "bad, where",
    [
        ({**CU3PD, "fraction_B": 1.5}, "fraction_B"),
        ({**CU3PD, "fraction_B": float("nan")}, "fraction_B"),
        ({**CU3PD, "fraction_B": "a quarter"}, "fraction_B"),
        ({**CU3PD, "pair": "Fe-Cr"}, "pair"),
        ({**CU3PD, "lattice": "diamond"}, "lattice"),
        ({**CU3PD, "repeats": 7}, "repeats"),
        ({**CU3PD, "repeats": 2.5}, "repeats"),
        ({**CU3PD, "ordering_seed": -1}, "ordering_seed"),
        ({**CU3PD, "formation_energy_eV_atom": -5.0}, "formation_energy_eV_atom"),  # asserted
        ({k: v for k, v in CU3PD.items() if k != "pair"}, "pair"),
        ("Cu3Pd please", "JSON"),
    ],
)
def test_hostile_input_is_invalid_with_a_reason(task, bad, where) -> None:
    (m,) = task.measure([bad])
    assert m.status == "invalid" and where in m.reason and len(m.reason) < 500


def test_a_relaxation_that_does_not_converge_is_failed_with_the_reason() -> None:
    task = labtwin.load_task("AlloyDesign-v2", max_relax_steps=3)
    (m,) = task.measure([{**CU3PD, "ordering": "random"}])
    assert m.status == "failed" and "did not converge in 3 steps" in m.reason
    assert m.cost > 0  # the steps it took are paid
    env = labtwin.make("AlloyDesign-v2", max_relax_steps=3)
    env.reset(seed=0)
    _, reward, _, _, info = env.step({**CU3PD, "ordering": "random"})
    assert info["status"] == "failed" and reward == 0.0


def test_same_seed_same_results_and_the_measurement_is_deterministic(task) -> None:
    first = task.measure([CU3PD, {**CU3PD, "ordering": "random", "ordering_seed": 7}], seed=1)
    again = task.measure([CU3PD, {**CU3PD, "ordering": "random", "ordering_seed": 7}], seed=2)
    for a, b in zip(first, again):  # no noise: another seed reads the same
        assert a.observables == b.observables
    other = task.measure([{**CU3PD, "ordering": "random", "ordering_seed": 8}])[0]
    assert other.observables != again[1].observables  # the ordering seed picks the ordering
    c1 = task.sample_conditions(np.random.default_rng(3))
    assert c1 == task.sample_conditions(np.random.default_rng(3))


def test_impossible_variant_is_out_of_reach() -> None:
    """No offered alloy reaches 4.6 Å: the largest relaxed element (Ag) is 4.06 Å and the
    40 random experiments here stay below 4.1 Å, so every score is below 1e-100."""
    task = labtwin.load_task("AlloyDesign-v2", impossible=True)
    conditions = task.sample_conditions(np.random.default_rng(0))
    assert abs(conditions["target_lattice_constant_A"] - IMPOSSIBLE_TARGET_A) <= 0.015
    rng = np.random.default_rng(1)
    measured = task.measure([task.random_experiment(rng) for _ in range(40)])
    ok = [m for m in measured if m.ok]
    assert len(ok) >= 35
    assert max(m["lattice_constant_A"] for m in ok) < 4.1
    assert max(task.reward(m, conditions) for m in ok) < 1e-100


#: every corner of the knob box: each pair, lattice and ordering, pure host, half and pure
#: solute, the smallest and the largest supercell (the ordering seed at its top end)
CORNERS = [
    {"pair": pair, "lattice": lattice, "ordering": ordering, "fraction_B": fraction,
     "repeats": repeats, "ordering_seed": 99}
    for pair in PAIRS for lattice in ("fcc", "bcc", "hcp") for ordering in ("ordered", "random")
    for fraction in (0.0, 0.5, 1.0) for repeats in (1, 3)
]  # fmt: skip


def test_the_corners_of_the_knob_box_relax_and_score_nothing_they_did_not_earn() -> None:
    """All 288 corners relax and measure; none comes near the impossible target (the largest
    lattice constant is 4.07 Å, pure Ag in the 3 x 3 x 3 bcc cell), and
    no pure-element cell, in any lattice, scores above 1e-3 at its own lattice constant (the
    largest is 7e-5: E_f = -1.4e-6 eV/atom, a relaxation residue)."""
    task = labtwin.load_task("AlloyDesign-v2", impossible=True)
    measured = task.measure(CORNERS)
    assert all(m.ok for m in measured), [m.reason for m in measured if not m.ok]
    impossible = task.sample_conditions(np.random.default_rng(0))
    assert max(m["lattice_constant_A"] for m in measured) < 4.1
    assert max(task.reward(m, impossible) for m in measured) < 1e-100
    for m in measured:
        own = {"target_lattice_constant_A": m["lattice_constant_A"]}
        assert 0.0 <= task.reward(m, own) <= 1.0
        if m["fraction_B"] in (0.0, 1.0):
            assert task.reward(m, own) < 1e-3


def test_a_cell_on_the_hull_lies_below_every_cell_of_its_composition(task) -> None:
    """Cu7Pt (1/8 Pt) in the three lattices' 2 x 2 x 2 supercells, ordered: no cell reads
    less E_hull than its distance above the lowest of the three.

    What was wrong (AlloyDesign-v1, a strict xfail here): the reference hull held the two
    elements and L1_2, L1_0 and B2 cells only, so it ran straight from Cu to L1_2 Cu3Pt and
    all three cells lay below it and read E_hull = 0, although the hcp cell lies 1.6
    meV/atom below the fcc one and the bcc cell (which relaxes to close packing) 1.0
    meV/atom below it. That stability, refuted by the lab's own cells, was paid: at the
    target 3.652 Å (the L1_2 Cu3Pt witness less 0.015 Å) the fcc cell (3.628 Å) scored 0.98,
    a success; over 1292 scanned cells of six pairs 42 read E_hull below 0.5 meV/atom while
    lying 0.6-6.9 meV/atom above the lower hull of the scanned cells, and such a cell
    succeeded in 88 of 200 sampled campaigns.

    Now (v2) the hull is that of every cell the lab can make (the shipped table): the fcc
    cell reads 2.17 meV/atom and scores 0.64 there, the bcc 1.55 and the hcp 0.55 (a random
    hcp Cu7Pt, seed 25, lies lower still), each at least its distance above the lowest of
    the three, within SAME_ENERGY_EV."""
    cells = [
        {**CU3PD, "pair": "Cu-Pt", "lattice": lattice, "fraction_B": 0.125}
        for lattice in ("fcc", "bcc", "hcp")
    ]
    measured = task.measure(cells)
    assert all(m.ok and m["fraction_B"] == 0.125 for m in measured)
    lowest = min(m["formation_energy_eV_atom"] for m in measured)
    for m in measured:
        above = m["formation_energy_eV_atom"] - lowest
        assert m["e_above_hull_eV_atom"] >= above - SAME_ENERGY_EV, (above, m.observables)


@pytest.mark.parametrize("agent", ["random", "cmaes", "bo"])
def test_baselines_run_through_the_numeric_view(agent, tmp_path) -> None:
    summaries, _ = run_campaigns(
        "AlloyDesign-v2", agent, n_campaigns=2, run_dir=tmp_path / agent, progress=False,
        budget=4,
    )  # fmt: skip
    assert len(summaries) == 2
    assert all(s.experiments == 4 and 0.0 <= s.best_score <= 1.0 for s in summaries)


#: a baseline's mean best score is exact for this code on one machine (the lab is
#: deterministic, the agents seeded); another machine's round-off moves relaxed energies by up
#: to 1e-5 eV/atom, a score by a few 1e-3 (exp(-E_hull / 5 meV))
BASELINE_MEAN = 0.01


@pytest.mark.slow
def test_baseline_reference_scores(tmp_path) -> None:
    """The lab's reference figures (docs/materials.md): over campaigns 0-7 at budget 20,
    random search succeeds in none (mean best 0.247), CMA-ES in none (0.309), BO in 2
    (0.282)."""
    expected = {"random": (0, 0.247), "cmaes": (0, 0.309), "bo": (2, 0.282)}
    for agent, (successes, mean) in expected.items():
        summaries, _ = run_campaigns(
            "AlloyDesign-v2", agent, n_campaigns=8, run_dir=tmp_path / agent, progress=False
        )
        best = [s.best_score for s in summaries]
        assert sum(b >= SUCCESS_SCORE for b in best) == successes, (agent, best)
        assert np.mean(best) == pytest.approx(mean, abs=BASELINE_MEAN), (agent, best)
