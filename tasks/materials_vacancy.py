"""Vacancy formation energy of an EMT metal: supercell size and relaxation as trade-offs
(VacancyFormation-v1).

The physics (:mod:`labtwin.simulators.materials.vacancy`): each campaign draws one of the
fcc EMT metals (Al, Cu, Ag, Au, Ni, Pd, Pt) and says which, and hidden factors that scale
every length and energy of that metal's EMT model (below). An experiment is a protocol: a
supercell of ``repeats``^3 conventional cells (N = 32, 108, 256 or 500 sites) at the
metal's zero-pressure lattice constant with one atom removed, relaxed with FIRE (the
batched Warp EMT engine, float64, asap's cutoff convention; every experiment of a step in
one batch) until the largest generalised force falls below ``fmax_eV_A`` or ``max_steps``
steps are spent (convergence is checked every 10 steps and at the step limit), with the
cell ``fixed`` (constant volume) or ``relaxed`` (zero pressure). The measurement is

    E_v = E(N - 1, relaxed) - (N - 1) e_bulk,

e_bulk the energy per atom of the perfect crystal (= (N - 1)/N E(N)), with what an agent
needs to judge it: the unrelaxed E_v (the first evaluation), the residual largest force,
the steps taken, whether the relaxation converged, the residual pressure and N - 1. A
relaxation that runs out of steps is still a reading (``converged`` = 0): judging it is
the agent's job. Every number is deterministic; measurements are cached per process by
protocol (the computation is deterministic, so a cached reading is the reading), and a
repeat costs what the first did.

The campaign's material is hidden. v0 measured the named metal itself, so the answer was
one of seven published numbers (:data:`REFERENCE_EV`): an agent that had learnt them
answered without an experiment, spent no compute and scored 1. Since v1 a campaign measures
the named metal's EMT model with every length multiplied by a hidden factor (0.96-1.04) and
every energy by another (0.8-1.2), drawn per campaign (corresponding states, exact:
:mod:`labtwin.tasks.materials_common`). The lab relaxes the named metal's cell with the
force tolerance converted to its units (times the length factor over the energy factor)
and reports energies times the energy factor, forces times energy over length, pressures
times energy over length cubed and the relaxed cell's positions times the length factor;
steps, atoms and cost are the named metal's. (With a relaxed cell the largest generalised
force may be a virial row, in eV, which the scaled material has times the energy factor
alone: there the tolerance and the reported force are the material's within the length
factor, 4 %.) The reference is :data:`REFERENCE_EV` times the energy factor, so the table
answer misses by up to 20 % of E_v (146 meV for Au, 379 meV for Ni) against a 2 meV
tolerance and succeeds on about 1 % of campaigns (2 of 200 in the tests). The finite-size
and convergence figures below are the named metals' (both factors 1); a campaign's scale
with its energy factor.

Finite size and convergence: E_v(N) approaches its dilute limit as 1/N (elastic images of
the vacancy), from above in fixed cells, and in relaxed ones from below for Ag, Au, Pd and
Pt, by up to 16 meV (Pt, N = 32); the unrelaxed value is 7-26 meV too high; a loose
tolerance stops early (at fmax = 0.1 eV/Å the Ag, Au, Pd and Pt cells count as converged
before any step, and Al's stops 7 meV high), while 1e-2 eV/Å is within 1.1 meV of 1e-4
and 1e-3 within 0.03 meV.

The answer: E_v of the campaign's material in eV, scored against the dilute limit of the
lab's own engine times the energy factor (:data:`REFERENCE_EV`: fixed-volume 6^3 and 7^3
supercells, 863 and 1371 atoms, relaxed to 1e-4 eV/Å and extrapolated linearly in 1/N; the
zero-pressure cells extrapolate to the same values within 3e-6 eV; a slow test recomputes
them). The score is

    exp(-((E - E_ref) / 2 meV)^2 / 2) * min(1, 30 / C),

C the compute the campaign spent before answering, in thousands of atom-evaluations (an
experiment costs (N - 1) (steps + 1)): within the allowance of 30 k only accuracy counts;
beyond it the score falls as 1/C. Success: a score of at least exp(-1/2) = 0.607 (within
2 meV inside the allowance). Experiments score 0.

So the lab asks for a protocol: one large, tight, zero-pressure cell is accurate but costs
85 k atom-evaluations (Cu, N = 500); small cells are cheap but off by several meV; two
small cells extrapolated in 1/N, or a mid-sized zero-pressure cell, land within 2 meV for
less than the allowance.

Baselines (one campaign per metal, each on its drawn hidden material, tolerances in its
units; scripted in ``tests/materials``): the largest cell (N = 500, zero pressure, 1e-4
eV/Å) is accurate to 0.35 meV but costs 45-90 k and succeeds for 2 of the 7 metals (mean
score 0.54; 0.53 on the named metals themselves, as in v0); the smallest (N = 32, fixed,
1e-2 eV/Å) for none (0.10; 0.08 in v0: its finite-size error scales with the energy
factor, and Cu's campaign has 0.81); three random protocols, answering the largest
converged cell, for 3 (0.42, as in v0); 3^3 and 4^3 zero-pressure cells at 1e-3 eV/Å
extrapolated in 1/N (about 25 k) for all 7 (1.00, as in v0).

No impossible variant (``impossible=True`` raises ValueError): the answer is one number, so
a guess can land inside the tolerance by luck.

Cost: (N - 1) times the energy-and-force evaluations of the relaxation (steps + 1), in
thousands.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, Field

from labtwin import Experiment, Measurement, ObservableSpec, Value, knob, register_task
from labtwin.frames import structure_panel
from labtwin.simulators.materials.emt import EMT_ELEMENTS
from labtwin.simulators.materials.emt_warp import default_device
from labtwin.simulators.materials.vacancy import (
    VacancyProtocol,
    VacancyResult,
    measure_vacancies,
)
from labtwin.task import package_versions
from labtwin.tasks.materials_common import (
    HIDDEN_MATERIAL,
    SUCCESS_SCORE,
    AnswerLab,
    draw_scales,
    scales_of,
)

#: the metals a campaign may draw, in the order of ``metal_index``
METALS: tuple[str, ...] = EMT_ELEMENTS
#: E_v at infinite dilution of the named metals in the lab's engine (eV; a campaign's
#: reference is this times its energy factor): fixed-volume 6^3 and 7^3 supercells
#: relaxed to 1e-4 eV/Å, extrapolated linearly in 1/N
#: (:func:`labtwin.simulators.materials.vacancy.converged_formation_energy`)
REFERENCE_EV: dict[str, float] = {
    "Al": 0.951862,
    "Cu": 1.220985,
    "Ag": 0.850308,
    "Au": 0.731899,
    "Ni": 1.894402,
    "Pd": 0.931137,
    "Pt": 1.018034,
}
#: answer tolerance [eV]
ENERGY_TOLERANCE_EV = 0.002
#: compute a campaign may spend before its answer loses score [k atom-evaluations]
COMPUTE_ALLOWANCE = 30.0


def vacancy_score(answer_eV: float, reference_eV: float, compute_spent: float) -> float:
    """The score of an answer (module doc).

    >>> vacancy_score(1.221, 1.221, 10.0)
    1.0
    >>> round(vacancy_score(1.223, 1.221, 60.0), 4)  # one tolerance off, twice the allowance
    0.3033
    """
    accuracy = math.exp(-0.5 * ((answer_eV - reference_eV) / ENERGY_TOLERANCE_EV) ** 2)
    return accuracy * min(1.0, COMPUTE_ALLOWANCE / max(compute_spent, 1e-12))


class VacancyRun(Experiment):
    """One vacancy-formation-energy measurement protocol."""

    repeats: int = knob(
        2,
        5,
        unit="cells",
        description="supercell: the 4-atom conventional cell repeated along each axis "
        "(N = 4 repeats^3 sites, one of them vacant)",
    )
    fmax_eV_A: float = knob(
        1e-4,
        1.0,
        unit="eV/Å",
        log=True,
        description="force tolerance of the FIRE relaxation (largest force on any atom, in "
        "the campaign's material)",
    )
    max_steps: int = knob(
        0, 1000, unit="steps", description="FIRE steps at most (0: the unrelaxed vacancy)"
    )
    cell: Literal["fixed", "relaxed"] = Field(
        description="fixed: the supercell keeps the bulk lattice constant (constant volume); "
        "relaxed: the cell relaxes with the atoms (zero pressure)"
    )


class VacancyAnswer(BaseModel):
    """The vacancy formation energy at infinite dilution of the campaign's material, in EMT."""

    vacancy_formation_energy_eV: float = Field(
        ge=0.0, le=5.0, allow_inf_nan=False, description="vacancy formation energy E_v [eV]"
    )


@register_task
class VacancyFormation(AnswerLab):
    """Measure the vacancy formation energy of an EMT metal.

    The lab's physics, score and guards are in the module docstring.
    """

    id = "VacancyFormation-v1"
    experiment_model = VacancyRun
    answer_model = VacancyAnswer
    observables = (
        ObservableSpec("vacancy_formation_energy_eV", "eV", "E(N-1, relaxed) - (N-1) e_bulk", 1.0),
        ObservableSpec("unrelaxed_formation_energy_eV", "eV", "the same before relaxation", 1.0),
        ObservableSpec(
            "max_force_eV_A",
            "eV/Å",
            "largest residual force (with a relaxed cell: also the virial per atom)",
            0.1,
        ),
        ObservableSpec("relax_steps", "steps", "FIRE steps taken", 100.0),
        ObservableSpec("converged", "", "1 if the largest force fell below fmax, else 0", 1.0),
        ObservableSpec("pressure_GPa", "GPa", "residual pressure of the vacancy cell", 1.0),
        ObservableSpec("n_atoms", "atoms", "atoms in the vacancy cell (N - 1)", 500.0),
    )
    public_conditions = (
        ObservableSpec(
            "metal_index",
            "",
            f"index of the metal in the lab's list ({', '.join(METALS)})",
            float(len(METALS)),
        ),
    )
    cost_unit = "k atom-evaluations"
    no_impossible_variant = (
        "the answer is one number, so a guess can land inside the tolerance by luck"
    )
    reward_description = (
        f"experiments score 0; the answer scores exp(-((E - E_ref) / "
        f"{ENERGY_TOLERANCE_EV * 1e3:g} meV)^2 / 2) * min(1, {COMPUTE_ALLOWANCE:g} / C), E_ref "
        f"the lab's converged dilute-limit E_v of the campaign's material and C the k "
        f"atom-evaluations spent before the answer; success: {SUCCESS_SCORE:.3f} or more"
    )
    brief = f"""
You measure the vacancy formation energy E_v of an fcc metal with Effective Medium Theory
(EMT); each campaign's metal is one of {", ".join(METALS)}, and you are told which.
{HIDDEN_MATERIAL}
Each experiment is a protocol: a supercell of repeats^3 conventional cells (N = 32, 108,
256 or 500 sites) at the bulk lattice constant with one atom removed, relaxed with FIRE
until the largest force is below fmax_eV_A or max_steps steps are spent, with the cell
fixed (constant volume) or relaxed (zero pressure). It reports E_v = E(N-1, relaxed) -
(N-1) e_bulk (eV), the unrelaxed E_v, the residual largest force, the steps taken, whether
it converged (1 or 0), the residual pressure and the number of atoms. Numbers are exact
for the model: a repeat reads the same. Small cells feel the vacancy's periodic images
(E_v approaches its dilute limit as 1/N); loose or unfinished relaxations leave E_v too
high. An experiment costs (N-1) x (steps + 1) atom-evaluations, counted in thousands.
Submit E_v at infinite dilution of the campaign's material in eV (of its EMT model, not of
the real metal); submitting uses one experiment of the budget. The answer scores
exp(-((E - E_ref) / {ENERGY_TOLERANCE_EV * 1e3:g} meV)^2 / 2) times min(1, {COMPUTE_ALLOWANCE:g} / C),
C the thousands of atom-evaluations your experiments spent: spend more than
{COMPUTE_ALLOWANCE:g} k and the score falls. {SUCCESS_SCORE:.3f} or more counts as a success.
"""

    # ---- campaigns -----------------------------------------------------------------

    def conditions_of(
        self, metal: str, length_scale: float = 1.0, energy_scale: float = 1.0
    ) -> dict[str, Any]:
        """The campaign state of ``metal`` scaled by ``length_scale`` and ``energy_scale``:
        its name and index (public), the factors and the reference E_v of the scaled
        material (hidden), so that a record re-scores from its conditions alone."""
        return {
            "metal": metal,
            "metal_index": METALS.index(metal),
            "length_scale": float(length_scale),
            "energy_scale": float(energy_scale),
            "reference_formation_energy_eV": REFERENCE_EV[metal] * energy_scale,
        }

    def nominal_conditions(self) -> dict[str, Any]:
        return self.conditions_of("Cu")

    def sample_conditions(self, rng: np.random.Generator) -> dict[str, Any]:
        metal = METALS[int(rng.integers(len(METALS)))]
        return self.conditions_of(metal, **draw_scales(rng))

    def describe_conditions(self, conditions: dict[str, Any]) -> str:
        return (
            f"The metal: fcc {conditions['metal']} (metal_index {conditions['metal_index']} "
            f"of {len(METALS)}), its lengths and energies scaled by this campaign's hidden "
            "factors."
        )

    # ---- the lab -------------------------------------------------------------------

    def protocol_of(self, run: VacancyRun, conditions: dict[str, Any]) -> VacancyProtocol:
        """The protocol on the named metal: the force tolerance (the campaign material's
        eV/Å) in the named metal's units; size, steps and cell mode as asked."""
        fmax = self.unscaled_force(run.fmax_eV_A, conditions)
        return VacancyProtocol(conditions["metal"], run.repeats, fmax, run.max_steps, run.cell)

    def measure_protocols(self, protocols: list[VacancyProtocol]) -> list[VacancyResult]:
        """Every protocol's result: cached ones from the cache, the others in one batch."""
        return self.cached(protocols, measure_vacancies)

    def simulate(self, experiments, conditions, rngs):  # noqa: D102 (documented on Task)
        protocols = [self.protocol_of(e, c) for e, c in zip(experiments, conditions)]
        provenance = {
            "simulator": "labtwin.simulators.materials.emt_warp (EMT, asap cutoff, float64), "
            "batched FIRE",
            "device": self.device or default_device(),
            "versions": package_versions("warp-lang", "ase", "pymatgen"),
        }
        results = self.measure_protocols(protocols)
        return [self._measurement(r, c, provenance) for r, c in zip(results, conditions)]

    def _measurement(
        self, result: VacancyResult, conditions: dict[str, Any], provenance: dict[str, Any]
    ) -> Measurement:
        """The named metal's ``result`` read in the campaign's material (module doc)."""
        length, energy = scales_of(conditions)
        structure = result.structure
        return Measurement(
            "ok",
            {
                "vacancy_formation_energy_eV": Value(result.formation_energy_eV * energy, "eV"),
                "unrelaxed_formation_energy_eV": Value(
                    result.unrelaxed_formation_energy_eV * energy, "eV"
                ),
                "max_force_eV_A": Value(result.max_force_eV_A * energy / length, "eV/Å"),
                "relax_steps": Value(float(result.relax_steps), "steps"),
                "converged": Value(float(result.converged), ""),
                "pressure_GPa": Value(result.pressure_GPa * energy / length**3, "GPa"),
                "n_atoms": Value(float(result.n_atoms), "atoms"),
            },
            cost=result.n_atoms * result.force_evaluations / 1000.0,
            provenance={**provenance, "metal": result.protocol.element},
            artifacts=self.structure_artifacts_of(  # the relaxed vacancy cell
                structure.species, structure.positions, structure.cell, conditions
            ),
        )

    def score_answer(self, answer: VacancyAnswer, conditions, history) -> float:  # noqa: D102
        spent = sum(m.cost for m in history)
        return vacancy_score(
            answer.vacancy_formation_energy_eV,
            float(conditions["reference_formation_energy_eV"]),
            spent,
        )

    def frame_panel(self, records, conditions):  # noqa: D102 (documented on Task)
        return structure_panel(records, "no vacancy cell relaxed yet")
