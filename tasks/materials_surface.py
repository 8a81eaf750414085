"""Surface energy of an EMT metal facet: slab thickness, vacuum and relaxation as trade-offs
(SurfaceEnergy-v1).

The physics (:mod:`labtwin.simulators.materials.surface`): each campaign draws one of the
fcc EMT metals (Al, Cu, Ag, Au, Ni, Pd, Pt) and one of its low-index facets ((111), (100),
(110)) and says which (its material is hidden: below). An experiment is a slab protocol:
the 1x1 slab of ``layers`` atomic planes (one atom per plane) at the metal's zero-pressure
lattice constant with a ``vacuum_A`` gap along the surface normal, its outer
``relax_layers`` planes on each face free to move and the planes between them held at their
bulk positions, relaxed with FIRE (the batched Warp EMT engine, float64, asap's cutoff
convention; every slab of a step in one batch) until the largest force on a free atom falls
below ``fmax_eV_A`` or ``max_steps`` steps are spent (convergence checked every 10 steps
and at the step limit), the cell fixed. The same protocol is run on a slab one plane
thinner, so a measurement reports

    gamma(L) = (E_slab(L) - L e_bulk) / (2 A)   and   gamma(L) - gamma(L - 1),

the surface energy and its change with thickness (J/m^2), with the unrelaxed gamma(L), the
largest residual force of the two slabs, the FIRE steps they took, whether both converged
and L. A relaxation that runs out of steps is still a reading (``converged`` = 0): judging
it is the agent's job. Every number is deterministic; readings are cached per process by
protocol (of the named metal), and a repeat costs what the first did.

The campaign's material is hidden: the named metal's EMT model with every length multiplied
by a factor drawn in 0.96-1.04 and every energy by one in 0.8-1.2 (corresponding states,
exact: :mod:`labtwin.tasks.materials_common`), so that the answer is not in a table. v0
measured the named facet itself, and answering its published gamma (:data:`REFERENCE_J_M2`)
without an experiment scored 1 (no compute spent, no compute penalty). The lab runs the
named metal's slab with the gap divided by the length factor and the force tolerance times
the length factor over the energy factor, and reads gamma, its change and the unrelaxed
gamma times energy_scale / length_scale^2 (an energy per area), forces times energy_scale /
length_scale and the slab's positions and cell times length_scale; layers, relaxed planes,
steps, atoms and cost do not change. The smallest gap offered, :data:`MIN_VACUUM_A`, is in
the campaign's lengths (the simulator's minimum is lowered to its unscaled value, 2.88-3.13
Å), so every gap the knob offers runs whatever the factor, and which gaps run says nothing
of it.

Convergence (figures of the named metals; a campaign's figures scale with its factors): a
gap below EMT's pair-list radius (5.0-5.9 Å, times the length factor) lets the slab feel its
periodic image across the vacuum and reads gamma too low (wider gaps read exactly the same:
no pair spans them); thin slabs of the open facets read it off by several mJ/m^2 (Pt(110):
successive changes 8, 6, 3 mJ/m^2 from 3 planes); unrelaxed or partly relaxed slabs read it
too high, by up to 0.11 J/m^2 (Pt(110)), while close-packed Cu(111) hardly relaxes; a loose
force tolerance stops early.

The answer: gamma in J/m^2, scored against the lab's own converged value of the named facet
(:data:`REFERENCE_J_M2`: 15- and 16-plane slabs with a 14 Å gap, every plane relaxed to
1e-5 eV/Å, which agree to 2e-7 J/m^2; a slow test recomputes them) times energy_scale /
length_scale^2, the campaign's material's. The score is

    exp(-((gamma - gamma_ref) / 0.5 mJ/m^2)^2 / 2) * min(1, 2 / C),

C the compute the campaign spent before answering, in thousands of atom-evaluations (an
experiment costs L (steps_L + 1) + (L - 1)(steps_L-1 + 1)). Success: a score of at least
exp(-1/2) = 0.607 (within 0.5 mJ/m^2 inside the allowance). Experiments score 0.

So the lab asks for a protocol (figures of the named metals again): a 24-plane slab relaxed
to 1e-4 eV/Å is exact but costs 4-5 k; an unrelaxed slab is nearly free but reads Pt(110)
112 mJ/m^2 and Au(111) 23 mJ/m^2 high; a 6-plane slab reads Pt(110) 0.6 mJ/m^2 low (its
thickness change, -2.9 mJ/m^2, says so); 8-12 fully relaxed planes at 1e-3 eV/Å land within
0.1 mJ/m^2 for 0.6-1.5 k.

Baselines (one campaign per metal and facet, 21, each on its drawn hidden material, scripted
in ``tests/materials``; :data:`BASELINE_FIGURES`): the table's gamma of the named facet, no
experiment (the v0 exploit), succeeds on none of 200 sampled campaigns (0.3 % expected:
gamma spreads over -26 % to +30 % against 0.5 mJ/m^2); the unrelaxed 8-plane slab succeeds
for 3 (mean score 0.18); a 24-plane slab relaxed to 1e-4 eV/Å for none (0.44: exact, but
4-5 k spent); a 5-plane relaxed slab for 18 (0.87: the open facets of Au, Pd, Pt are off); an
8-plane relaxed slab, and a 12-plane one when the 8-plane change exceeds 0.1 mJ/m^2, for all
21 (0.99); three random protocols, answering the thickest converged slab, for 7 (0.43). On
the named facets (v0) the same protocols succeed on the same campaigns; the factors only
shift scores: errors scale as gamma does, and a force tolerance of the campaign's material
is another of the named metal's, so relaxations stop at other steps (random: 0.41 in v0).
``labtwin run``'s numeric agents (random, CMA-ES, BO) submit no answer and score 0.

No impossible variant (``impossible=True`` raises ValueError): the answer is one number, so
a guess can land inside the tolerance by luck.

Cost: atoms times energy-and-force evaluations of both slabs, in thousands.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from labtwin import Experiment, Measurement, ObservableSpec, Value, knob, register_task
from labtwin.frames import structure_panel
from labtwin.simulators.materials.emt import EMT_ELEMENTS
from labtwin.simulators.materials.emt_warp import default_device
from labtwin.simulators.materials.surface import (
    EV_PER_A2_IN_J_M2,
    SurfaceProtocol,
    SurfaceResult,
    measure_surfaces,
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
#: the facets, in the order of ``facet_index``
FACETS: tuple[tuple[int, int, int], ...] = ((1, 1, 1), (1, 0, 0), (1, 1, 0))
#: the converged gamma of the lab's engine (J/m^2): 15- and 16-plane slabs, 14 Å gap, every
#: plane relaxed to 1e-5 eV/Å (the 16-plane value; the two agree to 2e-7 J/m^2)
REFERENCE_J_M2: dict[tuple[str, tuple[int, int, int]], float] = {
    ("Al", (1, 0, 0)): 0.730546,
    ("Al", (1, 1, 0)): 0.787562,
    ("Al", (1, 1, 1)): 0.706387,
    ("Cu", (1, 0, 0)): 1.124582,
    ("Cu", (1, 1, 0)): 1.218973,
    ("Cu", (1, 1, 1)): 1.034891,
    ("Ag", (1, 0, 0)): 0.614094,
    ("Ag", (1, 1, 0)): 0.664933,
    ("Ag", (1, 1, 1)): 0.546818,
    ("Au", (1, 0, 0)): 0.598530,
    ("Au", (1, 1, 0)): 0.635350,
    ("Au", (1, 1, 1)): 0.513931,
    ("Ni", (1, 0, 0)): 1.798784,
    ("Ni", (1, 1, 0)): 1.946341,
    ("Ni", (1, 1, 1)): 1.683237,
    ("Pd", (1, 0, 0)): 0.765715,
    ("Pd", (1, 1, 0)): 0.825185,
    ("Pd", (1, 1, 1)): 0.667206,
    ("Pt", (1, 0, 0)): 0.875915,
    ("Pt", (1, 1, 0)): 0.931415,
    ("Pt", (1, 1, 1)): 0.748588,
}
#: answer tolerance [J/m^2]
GAMMA_TOLERANCE_J_M2 = 0.0005
#: compute a campaign may spend before its answer loses score [k atom-evaluations]
COMPUTE_ALLOWANCE = 2.0
#: the smallest vacuum gap offered [Å], in the campaign's material's lengths: slabs this
#: close to their images do not overlap (nearest neighbours sit at 2.47-2.87 Å in the named
#: metals, 2.37-2.99 Å at any length factor), but feel each other through EMT's range. The
#: named metal runs at the gap over the length factor, and the simulator's minimum is this
#: over the factor too (2.88-3.13 Å): every gap the knob offers runs, and which ones run
#: says nothing of the factor
MIN_VACUUM_A = 3.0
#: scripted baselines, one campaign per metal and facet (21), each on its drawn hidden
#: material: successes and mean score (exact: the lab is deterministic, the factors and the
#: random baseline seeded; tests/materials). v0, on the named facets: the same successes,
#: means 0.176, 0.44, 0.87, 0.987 and 0.412
BASELINE_FIGURES: dict[str, tuple[int, float]] = {
    "unrelaxed": (3, 0.176),
    "brute_force": (0, 0.44),
    "thin_relaxed": (18, 0.867),
    "converged_in_thickness": (21, 0.987),
    "random": (7, 0.430),
}


def facet_name(miller: tuple[int, int, int]) -> str:
    return "(" + "".join(str(v) for v in miller) + ")"


def surface_score(answer_J_m2: float, reference_J_m2: float, compute_spent: float) -> float:
    """The score of an answer (module doc).

    >>> surface_score(1.0, 1.0, 1.5)
    1.0
    >>> round(surface_score(1.0005, 1.0, 4.0), 4)  # one tolerance off, twice the allowance
    0.3033
    """
    accuracy = math.exp(-0.5 * ((answer_J_m2 - reference_J_m2) / GAMMA_TOLERANCE_J_M2) ** 2)
    return accuracy * min(1.0, COMPUTE_ALLOWANCE / max(compute_spent, 1e-12))


class SlabRun(Experiment):
    """One surface-energy measurement protocol (a slab and one a plane thinner)."""

    layers: int = knob(
        4,
        24,
        unit="planes",
        description="atomic planes of the slab (one atom each); a slab of one plane fewer "
        "is measured with it for the change with thickness",
    )
    vacuum_A: float = knob(
        MIN_VACUUM_A,
        20.0,
        unit="Å",
        description="vacuum gap between the slab and its periodic image along the normal",
    )
    relax_layers: int = knob(
        0,
        12,
        unit="planes",
        description="outer planes on each face free to relax; the planes between are held "
        "at bulk positions (0: the unrelaxed slab; half the slab or more: every plane)",
    )
    fmax_eV_A: float = knob(
        1e-4,
        1.0,
        unit="eV/Å",
        log=True,
        description="force tolerance of the FIRE relaxation (largest force on a free atom)",
    )
    max_steps: int = knob(0, 1000, unit="steps", description="FIRE steps at most per slab")


class SurfaceAnswer(BaseModel):
    """The facet's converged surface energy, in EMT."""

    surface_energy_J_m2: float = Field(
        ge=0.0, le=5.0, allow_inf_nan=False, description="surface energy gamma [J/m^2]"
    )


@register_task
class SurfaceEnergy(AnswerLab):
    """Measure the surface energy of an EMT metal facet.

    The lab's physics, score and guards are in the module docstring.
    """

    id = "SurfaceEnergy-v1"
    experiment_model = SlabRun
    answer_model = SurfaceAnswer
    observables = (
        ObservableSpec("surface_energy_J_m2", "J/m^2", "gamma of the L-plane slab", 1.0),
        ObservableSpec(
            "thickness_change_J_m2", "J/m^2", "gamma(L) - gamma(L - 1): convergence", 0.01
        ),
        ObservableSpec("unrelaxed_surface_energy_J_m2", "J/m^2", "gamma(L) before relaxation", 1.0),
        ObservableSpec(
            "max_force_eV_A", "eV/Å", "largest residual force on a free atom, both slabs", 0.1
        ),
        ObservableSpec("relax_steps", "steps", "FIRE steps taken, both slabs", 100.0),
        ObservableSpec("converged", "", "1 if both slabs fell below fmax, else 0", 1.0),
        ObservableSpec("n_atoms", "atoms", "atoms (planes) of the thicker slab", 24.0),
    )
    public_conditions = (
        ObservableSpec(
            "metal_index",
            "",
            f"index of the metal in the lab's list ({', '.join(METALS)})",
            float(len(METALS)),
        ),
        ObservableSpec(
            "facet_index",
            "",
            f"index of the facet in the lab's list ({', '.join(map(facet_name, FACETS))})",
            float(len(FACETS)),
        ),
    )
    cost_unit = "k atom-evaluations"
    no_impossible_variant = (
        "the answer is one number, so a guess can land inside the tolerance by luck"
    )
    reward_description = (
        f"experiments score 0; the answer scores exp(-((gamma - gamma_ref) / "
        f"{GAMMA_TOLERANCE_J_M2 * 1e3:g} mJ/m^2)^2 / 2) * min(1, {COMPUTE_ALLOWANCE:g} / C), "
        f"gamma_ref the lab's converged surface energy and C the k atom-evaluations spent "
        f"before the answer; success: {SUCCESS_SCORE:.3f} or more"
    )
    brief = f"""
You measure the surface energy gamma of a low-index facet of an fcc metal with Effective
Medium Theory (EMT); each campaign's metal (one of {", ".join(METALS)}) and facet (one of
{", ".join(map(facet_name, FACETS))}) are given. {HIDDEN_MATERIAL} Each experiment is a slab
protocol: a slab of `layers` atomic planes (one atom per plane, 4-24) at the bulk lattice
constant with a vacuum gap of vacuum_A along the normal, its outer relax_layers planes on
each face free to relax (the planes between held at bulk positions), relaxed with FIRE
until the largest force is below fmax_eV_A or max_steps steps are spent. The same protocol
also runs on a slab one plane thinner. It reports gamma(L) = (E_slab - L e_bulk) / (2 A) in
J/m^2, the change gamma(L) - gamma(L - 1), the unrelaxed gamma(L), the residual largest
force, the FIRE steps of both slabs, whether both converged (1 or 0) and L. Numbers are
exact for the model: a repeat reads the same. Thin slabs and thin gaps (where the slab
feels its image across the vacuum) misread gamma; unrelaxed or loosely relaxed slabs read
it too high. An experiment costs its atoms times their energy evaluations (steps + 1) over
both slabs, counted in thousands. Submit gamma of the campaign's material's facet in J/m^2
(of its EMT model, not of the real metal); submitting uses one experiment of the budget.
The answer scores exp(-((gamma - gamma_ref) / {GAMMA_TOLERANCE_J_M2 * 1e3:g} mJ/m^2)^2 / 2)
times min(1, {COMPUTE_ALLOWANCE:g} / C), C the thousands of atom-evaluations your
experiments spent: spend more than {COMPUTE_ALLOWANCE:g} k and the score falls.
{SUCCESS_SCORE:.3f} or more counts as a success.
"""

    # ---- campaigns -----------------------------------------------------------------

    def conditions_of(
        self,
        metal: str,
        miller: tuple[int, int, int],
        length_scale: float = 1.0,
        energy_scale: float = 1.0,
    ) -> dict[str, Any]:
        """The campaign state of ``metal``'s ``miller`` facet scaled by ``length_scale`` and
        ``energy_scale``: names and indices (public), the factors and the reference gamma of
        the scaled material (hidden: an energy per area, so the table's value times
        energy_scale / length_scale^2), so that a record re-scores from its conditions alone."""
        miller = tuple(int(v) for v in miller)  # type: ignore[assignment]
        return {
            "metal": metal,
            "facet": facet_name(miller),
            "metal_index": METALS.index(metal),
            "facet_index": FACETS.index(miller),
            "length_scale": float(length_scale),
            "energy_scale": float(energy_scale),
            "reference_surface_energy_J_m2": REFERENCE_J_M2[(metal, miller)]
            * energy_scale
            / length_scale**2,
        }

    def nominal_conditions(self) -> dict[str, Any]:
        return self.conditions_of("Cu", (1, 0, 0))

    def sample_conditions(self, rng: np.random.Generator) -> dict[str, Any]:
        metal = METALS[int(rng.integers(len(METALS)))]
        miller = FACETS[int(rng.integers(len(FACETS)))]
        return self.conditions_of(metal, miller, **draw_scales(rng))

    def describe_conditions(self, conditions: dict[str, Any]) -> str:
        return (
            f"The surface: fcc {conditions['metal']} {conditions['facet']} (metal_index "
            f"{conditions['metal_index']} of {len(METALS)}, facet_index "
            f"{conditions['facet_index']} of {len(FACETS)}), its lengths and energies scaled by "
            "this campaign's hidden factors."
        )

    # ---- the lab -------------------------------------------------------------------

    def protocols_of(self, run: SlabRun, conditions: dict[str, Any]) -> list[SurfaceProtocol]:
        """The run's two slabs of the named metal: ``layers`` planes and one fewer, the gap
        and the force tolerance in the named metal's units (:data:`MIN_VACUUM_A` too)."""
        miller = FACETS[int(conditions["facet_index"])]
        return [
            SurfaceProtocol(
                conditions["metal"],
                miller,
                n,
                self.unscaled_force(run.fmax_eV_A, conditions),
                run.max_steps,
                self.unscaled_length(run.vacuum_A, conditions),
                relax_layers=run.relax_layers,
                min_vacuum_A=self.unscaled_length(MIN_VACUUM_A, conditions),
            )  # fmt: skip
            for n in (run.layers, run.layers - 1)
        ]

    def measure_protocols(self, protocols: list[SurfaceProtocol]) -> list[SurfaceResult]:
        """Every protocol's result: cached ones from the cache, the others in one batch."""
        return self.cached(protocols, measure_surfaces)

    def simulate(self, experiments, conditions, rngs):  # noqa: D102 (documented on Task)
        pairs = [self.protocols_of(e, c) for e, c in zip(experiments, conditions)]
        results = self.measure_protocols([p for pair in pairs for p in pair])
        provenance = {
            "simulator": "labtwin.simulators.materials.emt_warp (EMT, asap cutoff, float64), "
            "batched FIRE, pymatgen SlabGenerator",
            "device": self.device or default_device(),
            "versions": package_versions("warp-lang", "ase", "pymatgen"),
        }
        return [
            self._measurement(results[2 * k], results[2 * k + 1], conditions[k], provenance)
            for k in range(len(pairs))
        ]

    def _measurement(
        self,
        thick: SurfaceResult,
        thin: SurfaceResult,
        conditions: dict[str, Any],
        provenance: dict[str, Any],
    ) -> Measurement:
        """The named metal's two slabs read as the campaign's material: energies per area
        times energy_scale / length_scale^2, forces times energy_scale / length_scale,
        lengths times length_scale; steps, atoms and cost as they are."""
        structure = thick.structure
        length, energy = scales_of(conditions)
        per_area = energy / length**2
        gamma = thick.surface_energy_J_m2 * per_area
        change = (thick.surface_energy_J_m2 - thin.surface_energy_J_m2) * per_area
        max_force = max(thick.max_force_eV_A, thin.max_force_eV_A) * energy / length
        return Measurement(
            "ok",
            {
                "surface_energy_J_m2": Value(gamma, "J/m^2"),
                "thickness_change_J_m2": Value(change, "J/m^2"),
                "unrelaxed_surface_energy_J_m2": Value(
                    thick.unrelaxed_surface_energy_J_m2 * per_area, "J/m^2"
                ),
                "max_force_eV_A": Value(max_force, "eV/Å"),
                "relax_steps": Value(float(thick.relax_steps + thin.relax_steps), "steps"),
                "converged": Value(float(thick.converged and thin.converged), ""),
                "n_atoms": Value(float(thick.n_atoms), "atoms"),
            },
            cost=(thick.n_atoms * thick.force_evaluations + thin.n_atoms * thin.force_evaluations)
            / 1000.0,
            provenance={
                **provenance,
                "metal": thick.protocol.element,
                "facet": facet_name(thick.protocol.miller),
                "surface_energy_eV_A2": gamma / EV_PER_A2_IN_J_M2,
            },
            artifacts=self.structure_artifacts_of(  # the relaxed thicker slab
                structure.species, structure.positions, structure.cell, conditions
            ),
        )

    def score_answer(self, answer: SurfaceAnswer, conditions, history) -> float:  # noqa: D102
        spent = sum(m.cost for m in history)
        return surface_score(
            answer.surface_energy_J_m2,
            float(conditions["reference_surface_energy_J_m2"]),
            spent,
        )

    def frame_panel(self, records, conditions):  # noqa: D102 (documented on Task)
        return structure_panel(records, "no slab relaxed yet")
