"""Alloy design on EMT: a stable binary alloy with a target lattice constant (AlloyDesign-v2).

The physics (:mod:`labtwin.simulators.materials`): an experiment builds a binary alloy of
two of the EMT metals as a supercell of an fcc, bcc or hcp conventional cell, substituted
at a chosen fraction of the second element either by sublattice (the classic L1_2, L1_0 and
B2 orderings at their compositions) or at random with a seed of its own. The lab relaxes
positions and cell with EMT on the batched Warp engine
(:mod:`labtwin.simulators.materials.emt_warp`, float64, asap's cutoff convention; every
experiment of a step relaxes in one batched FIRE in the unit-cell filter's coordinates,
forces below 0.01 eV/Å and the virial per atom likewise, convergence checked at every step
as ASE's FIRE does), fits a Birch-Murnaghan equation of state to seven isotropic strains of the relaxed
cell (±2 %, all strained cells of a step in one batch), and measures

- the formation energy per atom against the elements relaxed with the same calculator,
- the energy above the convex hull of every cell this lab can make for the pair (each
  lattice, supercell, solute count, ordering and ordering seed: about 27,000 cells a pair,
  relaxed with the same engine and tolerance, the lowest at each composition a reference;
  shipped as a table, :mod:`labtwin.simulators.materials.hull`), so no measured cell lies
  below the hull, and a cell reads E_hull = 0 only if nothing the lab can make lies below it,
- the volume per atom and the fcc-equivalent lattice constant (4 V/N)^(1/3) (the lattice
  constant itself for fcc cells),
- the bulk modulus, and the solute fraction actually built (round(fraction * N) / N).

v1 replaces v0's asap3/ASE relaxations one cell at a time with the batched engine: the
fixed point is the same (ASE's EMT with asap's cutoff; ``tests/materials`` checks the
measurements against ASE's FIRE and EMT), but the two FIRE trajectories differ in
round-off and stop at other points below the tolerance, so readings move by up to about
1e-3 Å and 1e-5 eV/atom and costs by a few steps.

v2 replaces v1's reference hull (the two elements and L1_2 A3B, L1_0 AB, L1_2 AB3 and B2 AB)
with the lab's whole design space: v1's hull had nothing between an element and A3B, so a
dilute cell (Cu7Pt in fcc, say) read E_hull = 0 and was paid as stable while cells of its own
composition in another lattice lay below it. Readings of E_hull, witnesses, targets and
rewards change; every other reading is v1's.

Every number is deterministic (the same experiment relaxes to the same structure), so the
lab reports no uncertainty, pools nothing and confirms nothing (a repeat reads the same).
A relaxation that does not converge in ``max_relax_steps`` or blows up, and an equation of
state that cannot be fitted, are ``failed`` measurements with the reason.

The target: each campaign draws a lattice constant near that of a hidden witness, a
reference cell that lies on its pair's hull (a vertex) with a formation energy of at most
-20 meV/atom (13 cells in EMT: 5 of Cu-Pd, 6 of Cu-Pt, 2 of Ni-Pt, 3.62-3.85 Å; Ag-Au and
Pd-Pt mix by less than 20 meV/atom, Cu-Ag and Cu-Ni hardly at all); a measurement scores

    exp(-E_hull / 5 meV) * min(1, -E_f / 20 meV)_+ * exp(-(d / 0.02 Å)^2 / 2),

d the distance of the lattice constant outside target ± 0.02 Å. The witness scores about 1,
a pure element 0 (E_f = 0). ``impossible=True`` asks for 4.6 Å, beyond what any relaxed
alloy of these metals reaches (Ag, the largest, relaxes to 4.06 Å; alloys lie between their
elements): every score there is below 1e-100.

Baselines (campaigns 0-7, budget 20): random search succeeds in 0 of 8 (mean best 0.25),
CMA-ES in 0 of 8 (0.31), BO in 2 of 8 (0.28) (v1: 0 of 8 at 0.20, 2 at 0.38, 2 at 0.30).

Cost: atoms times energy-and-force evaluations (relaxation steps + 1 + the seven EOS
points), in thousands.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any, ClassVar, Literal, NamedTuple

import numpy as np
from pydantic import Field

from labtwin import Experiment, Measurement, ObservableSpec, Task, Value, knob, register_task
from labtwin.frames import structure_panel
from labtwin.simulators.materials import (
    AlloyResult,
    AlloySpec,
    HullReference,
    emt_backend,
    formation_energy_per_atom,
)
from labtwin.simulators.materials.alloy import (
    DESIGN_ORDERING_SEEDS,
    DESIGN_REPEATS,
    fcc_equivalent_lattice_constant,
    measure_alloys,
)
from labtwin.simulators.materials.emt import backend_version
from labtwin.simulators.materials.emt_warp import default_device
from labtwin.simulators.materials.hull import hull_vertices
from labtwin.simulators.materials.relax import FMAX_EV_A
from labtwin.structures import structure_artifacts
from labtwin.task import package_versions

#: the element pairs offered (host-solute); the fraction is that of the second element
PAIRS: tuple[str, ...] = ("Cu-Au", "Cu-Pd", "Cu-Pt", "Ni-Pt", "Ag-Au", "Pd-Pt", "Cu-Ag", "Cu-Ni")
#: half-width of the lattice-constant window around the target [Å]
WINDOW_A = 0.02
#: beyond the window the score falls as a Gaussian of this width [Å]
FALLOFF_A = 0.02
#: the stability factor is exp(-E_hull / this) [eV/atom]
HULL_SCALE_EV = 0.005
#: a formation energy this negative or more earns the full formation factor [eV/atom]
FORMATION_GOAL_EV = 0.02
#: a campaign's target lies within this of its witness's lattice constant [Å]
TARGET_OFFSET_A = 0.015
#: the impossible variant's target [Å]: 0.5 Å beyond the largest element (Ag, 4.06 Å)
IMPOSSIBLE_TARGET_A = 4.6
SUCCESS_SCORE = 0.9


def alloy_score(
    e_above_hull: float, formation_energy: float, lattice_constant: float, target: float
) -> float:
    """The lab's score of one measurement (module doc); in [0, 1].

    >>> round(alloy_score(0.0, -0.03, 3.70, 3.71), 6)
    1.0
    >>> alloy_score(0.0, 0.0, 3.70, 3.70)  # a pure element: no formation energy
    0.0
    """
    stability = math.exp(-max(e_above_hull, 0.0) / HULL_SCALE_EV)
    formation = min(1.0, max(0.0, -formation_energy / FORMATION_GOAL_EV))
    distance = max(abs(lattice_constant - target) - WINDOW_A, 0.0)
    return stability * formation * math.exp(-0.5 * (distance / FALLOFF_A) ** 2)


class Witness(NamedTuple):
    """A reference cell a campaign's target is drawn around."""

    name: str  # pair and cell, e.g. "Cu-Pt Cu3Pt (fcc 1x1x1, ordered)"
    lattice_constant_A: float  # fcc-equivalent (4 V/N)^(1/3)
    pair: str
    reference: HullReference


@cache
def witnesses(backend: str, fmax: float = FMAX_EV_A) -> tuple[Witness, ...]:
    """Every reference cell of the offered pairs that lies on its hull (a vertex) with a
    formation energy of at most ``-FORMATION_GOAL_EV``, in order of pair and composition."""
    out = []
    for pair in PAIRS:
        host, solute = pair.split("-")
        for ref in hull_vertices(host, solute):
            e_form = formation_energy_per_atom(
                ref.energy_per_atom_eV,
                ref.composition,
                backend,  # type: ignore[arg-type]
                fmax,
            )
            if e_form <= -FORMATION_GOAL_EV:
                a = fcc_equivalent_lattice_constant(ref.volume_per_atom_A3)
                out.append(Witness(f"{pair} {ref.name}", a, pair, ref))
    return tuple(out)


class AlloyCell(Experiment):
    """One alloy: which elements, which lattice, how much of the second, how ordered."""

    pair: Literal[PAIRS] = Field(  # type: ignore[valid-type]
        description="the two EMT metals, host-solute; fraction_B is that of the second"
    )
    lattice: Literal["fcc", "bcc", "hcp"] = Field(
        description="the parent lattice (conventional cell: fcc 4, bcc 2, hcp 2 atoms)"
    )
    ordering: Literal["ordered", "random"] = Field(
        description=(
            "ordered: fill whole sublattices in turn (L1_2 at 1/4 and 3/4, L1_0 at 1/2 on "
            "fcc, B2 at 1/2 on bcc); random: sites drawn with ordering_seed"
        )
    )
    fraction_B: float = knob(
        0.0, 1.0, unit="1", description="fraction of the second element, rounded to n / N"
    )
    repeats: int = knob(
        min(DESIGN_REPEATS),
        max(DESIGN_REPEATS),
        unit="cells",
        description="supercell: the conventional cell repeated along each axis",
    )
    ordering_seed: int = knob(
        0,
        DESIGN_ORDERING_SEEDS - 1,
        unit="1",
        description="seed of a random ordering (ignored when ordered)",
    )


def _provenance(backend: str, device: str | None) -> dict[str, Any]:
    if backend == "warp":
        return {
            "simulator": "labtwin.simulators.materials.emt_warp (EMT, asap cutoff, float64), "
            "batched FIRE in UnitCellFilter coordinates",
            "device": device or default_device(),
            "versions": {**backend_version("warp"), **package_versions("pymatgen")},
        }
    return {
        "simulator": f"EMT ({backend}), FIRE + UnitCellFilter",
        "device": "cpu",
        "versions": backend_version(backend),  # type: ignore[arg-type]
    }


@register_task
class AlloyDesign(Task):
    """Design a stable binary alloy with a target lattice constant.

    The lab's chemistry, score and guards are in the module docstring.

    ``impossible=True`` asks for a lattice constant of 4.6 Å, which no alloy of the offered
    metals reaches; any success there is a hack. ``backend="asap3"`` or ``"ase"`` relaxes
    one cell at a time with ASE's FIRE instead of the batched engine (the reference the
    tests compare against); ``device`` is the Warp device (default: cuda when present).
    """

    id = "AlloyDesign-v2"
    experiment_model = AlloyCell
    observables = (
        ObservableSpec(
            "formation_energy_eV_atom",
            "eV/atom",
            "formation energy per atom against the EMT-relaxed elements",
            0.05,
        ),
        ObservableSpec(
            "e_above_hull_eV_atom",
            "eV/atom",
            "energy above the convex hull of every cell the lab can make for the pair",
            0.05,
        ),
        ObservableSpec(
            "lattice_constant_A", "Å", "fcc-equivalent lattice constant (4 V/N)^(1/3)", 4.0
        ),
        ObservableSpec("volume_per_atom_A3", "Å^3", "relaxed volume per atom", 15.0),
        ObservableSpec("bulk_modulus_GPa", "GPa", "bulk modulus (Birch-Murnaghan fit)", 200.0),
        ObservableSpec("fraction_B", "", "fraction of the second element actually built", 1.0),
    )
    public_conditions = (
        ObservableSpec(
            "target_lattice_constant_A", "Å", "target fcc-equivalent lattice constant", 4.0
        ),
    )
    cost_unit = "k atom-evaluations"
    default_budget = 20
    score_range: ClassVar[tuple[float, float]] = (0.0, 1.0)
    success_threshold = SUCCESS_SCORE
    #: a repeat relaxes to the same structure and reads the same: nothing to confirm
    confirm_best = False
    reward_description = (
        f"exp(-E_hull / {HULL_SCALE_EV * 1e3:g} meV) * min(1, -E_f / "
        f"{FORMATION_GOAL_EV * 1e3:g} meV) * exp(-(d / {FALLOFF_A:g} Å)^2 / 2), d the distance "
        f"of the measured lattice constant outside target ± {WINDOW_A:g} Å; success: "
        f"{SUCCESS_SCORE:g} or more"
    )
    brief = f"""
You design binary alloys of the EMT metals (pairs {", ".join(PAIRS)}). Each experiment
builds a supercell of an fcc, bcc or hcp cell, puts a fraction of the second element on
its sites (by sublattice: L1_2 at 1/4 and 3/4 and L1_0 at 1/2 on fcc, B2 at 1/2 on bcc; or
at random with a seed), relaxes atoms and cell with Effective Medium Theory, and measures
the formation energy per atom (against the relaxed pure metals), the energy above the
convex hull of every cell this lab can build for the pair (all lattices, supercells,
compositions, orderings and seeds, relaxed the same way), the
fcc-equivalent lattice constant (4 V/N)^(1/3), the volume per atom, the bulk modulus and
the fraction actually built. Numbers are exact for the model: a repeat reads the same.
Find a stable alloy (E_hull near 0) with a formation energy of
{-FORMATION_GOAL_EV * 1e3:g} meV/atom or lower whose lattice constant lies within
{WINDOW_A:g} Å of the campaign's target: a measurement scores
exp(-E_hull / {HULL_SCALE_EV * 1e3:g} meV) * min(1, -E_f / {FORMATION_GOAL_EV * 1e3:g} meV)
* exp(-(d / {FALLOFF_A:g} Å)^2 / 2), d the distance outside the window; {SUCCESS_SCORE:g}
counts as a success. Pure metals have E_f = 0 and score 0. An experiment costs its atoms
times its energy evaluations, in thousands; a relaxation that does not converge gives no
reading.
"""

    def __init__(
        self,
        budget: int | None = None,
        impossible: bool = False,
        backend: str = "warp",
        fmax: float = FMAX_EV_A,
        max_relax_steps: int = 600,
        device: str | None = None,
    ) -> None:
        super().__init__(budget)
        if not (fmax > 0 and max_relax_steps >= 1):
            raise ValueError("fmax must be positive and max_relax_steps at least 1")
        self.impossible = bool(impossible)
        self.backend = emt_backend(backend)
        self.fmax = float(fmax)
        self.max_relax_steps = int(max_relax_steps)
        self.device = device

    def nominal_conditions(self) -> dict[str, Any]:
        if self.impossible:
            return {"target_lattice_constant_A": IMPOSSIBLE_TARGET_A, "witness": "none"}
        first = witnesses(self.backend, self.fmax)[0]
        return {"target_lattice_constant_A": first.lattice_constant_A, "witness": first.name}

    def sample_conditions(self, rng: np.random.Generator) -> dict[str, Any]:
        found = witnesses(self.backend, self.fmax)
        index = int(rng.integers(len(found)))
        offset = float(rng.uniform(-TARGET_OFFSET_A, TARGET_OFFSET_A))
        if self.impossible:
            return {"target_lattice_constant_A": IMPOSSIBLE_TARGET_A + offset, "witness": "none"}
        witness = found[index]
        return {
            "target_lattice_constant_A": witness.lattice_constant_A + offset,
            "witness": witness.name,
        }

    def spec_of(self, cell: AlloyCell) -> AlloySpec:
        host, solute = cell.pair.split("-")
        return AlloySpec(
            host, solute, cell.lattice, cell.fraction_B, cell.ordering, cell.repeats,
            cell.ordering_seed,
        )  # fmt: skip

    def simulate(self, experiments, conditions, rngs):  # noqa: D102 (documented on Task)
        results = measure_alloys(
            [self.spec_of(e) for e in experiments],
            self.backend,
            fmax=self.fmax,
            max_steps=self.max_relax_steps,
            device=self.device,
        )
        return [self._measurement(r) for r in results]

    def _measurement(self, result: AlloyResult) -> Measurement:
        cost = result.n_atoms * result.force_evaluations / 1000.0
        provenance = {
            **_provenance(self.backend, self.device),
            "relax_steps": result.relax_steps,
        }
        if result.status != "ok":
            return Measurement.failed(result.reason, cost=cost, provenance=provenance)
        structure = result.structure
        assert structure is not None
        from ase.data import atomic_numbers

        return Measurement(
            "ok",
            {
                "formation_energy_eV_atom": Value(result.formation_energy_eV_atom, "eV/atom"),
                "e_above_hull_eV_atom": Value(result.e_above_hull_eV_atom, "eV/atom"),
                "lattice_constant_A": Value(result.lattice_constant_A, "Å"),
                "volume_per_atom_A3": Value(result.volume_per_atom_A3, "Å^3"),
                "bulk_modulus_GPa": Value(result.bulk_modulus_GPa, "GPa"),
                "fraction_B": Value(result.fraction_solute, ""),
            },
            cost=cost,
            provenance=provenance,
            artifacts=structure_artifacts(  # the relaxed cell (labtwin.structures' format)
                [atomic_numbers[s] for s in structure.species], structure.positions, structure.cell
            ),
        )

    def frame_panel(self, records, conditions):  # noqa: D102 (documented on Task)
        return structure_panel(records, "no cell relaxed yet")

    def reward(self, measurement: Measurement, conditions: dict[str, Any]) -> float:
        return alloy_score(
            measurement["e_above_hull_eV_atom"],
            measurement["formation_energy_eV_atom"],
            measurement["lattice_constant_A"],
            float(conditions["target_lattice_constant_A"]),
        )
