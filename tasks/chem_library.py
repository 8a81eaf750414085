"""Molecule design by picking from a library: MoleculeDesign-v0's profiles, a numeric view.

``MoleculeLibrary-v0`` is :class:`~labtwin.tasks.chem_design.MoleculeDesign` with the
molecule chosen from :data:`LIBRARY_SMILES` instead of written: an experiment is a library
SMILES and a measurement kind, both ``Literal`` choices, so the lab's default numeric view
is a ``Box(-1, 1, (2,))`` whose first axis picks the molecule (bin ``i`` of 38) and whose
second the kind (descriptors, xtb). Numeric agents (random search, CMA-ES, BO, SB3) run
it like any numeric lab; an LLM gets the same choices as the tool schema's enum.

The campaigns, measurements and rewards are MoleculeDesign-v0's: the same profiles from
the same seeds, the same RDKit and GFN2-xTB engine, the same desirability score and guards.
The library is MoleculeDesign-v0's random-experiment library (:data:`LIBRARY`: 20 common
drugs and chemicals) followed by the hidden molecules its profiles are built around
(:data:`WITNESSES`: 18 drug-like molecules), so every profile is met by at least one
library molecule: the task is to find it within the budget.

Why a lab of its own rather than a view of MoleculeDesign-v0: a numeric view changes that
lab's default action space (a ``Box`` instead of JSON text) and adds action columns to its
observation, which would change MoleculeDesign-v0's environment under the same id.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from labtwin import Experiment, Task, register_task
from labtwin.tasks.chem_design import (
    DESCRIPTOR_COST_S,
    LIBRARY,
    SA_SCORE_MAX,
    WITNESSES,
    XTB_COST_PER_ATOM_S,
    XTB_COST_S,
    MoleculeDesign,
)

#: the molecules an experiment chooses from, in this order (the numeric view's bins)
LIBRARY_SMILES: tuple[str, ...] = tuple(dict.fromkeys((*LIBRARY, *WITNESSES)))
LibrarySmiles = Literal[LIBRARY_SMILES]  # type: ignore[valid-type]


class LibraryExperiment(Experiment):
    """One library molecule and what to measure of it."""

    smiles: LibrarySmiles = Field(  # type: ignore[valid-type]
        description="a molecule of the lab's library, as its SMILES (one of the listed values)"
    )
    kind: Literal["descriptors", "xtb"] = Field(
        "descriptors",
        description=(
            "descriptors: RDKit descriptors only (cheap); xtb: also conformers, MMFF94 "
            "energies and a GFN2-xTB single point (gap, dipole, energy; costlier)"
        ),
    )


@register_task
class MoleculeLibrary(MoleculeDesign):
    """Pick molecules from a shipped library that meet a drug-like property profile.

    MoleculeDesign-v0's profiles and scores; the molecule is a choice among
    :data:`LIBRARY_SMILES`.

    Success: one molecule meets every criterion of the profile (score 1); every profile is
    met by at least one library molecule (its witness). ``impossible=True``: the profile
    no molecule meets (MoleculeDesign-v0's).
    """

    id = "MoleculeLibrary-v0"
    experiment_model = LibraryExperiment
    brief = f"""
You screen a library of {len(LIBRARY_SMILES)} small drug-like molecules. Each experiment
picks one library molecule (its SMILES, one of the values the tool lists) and a measurement
kind: "descriptors" (cheap, {DESCRIPTOR_COST_S:g} CPU-s: RDKit's molecular weight, Crippen
logP, TPSA, H-bond donors/acceptors, rotatable bonds, rings, heavy atoms, QED, synthetic
accessibility, and the Tanimoto similarity to this campaign's reference molecule) or "xtb"
(about {XTB_COST_S:g} + {XTB_COST_PER_ATOM_S:g} CPU-s per atom with hydrogens: all of that
plus an MMFF94 conformer ensemble and a GFN2-xTB calculation of the HOMO-LUMO gap, dipole
moment and energy). The campaign's profile gives ranges of logP, molecular weight and TPSA,
a least QED, and sometimes a window of the xTB gap (only an "xtb" experiment measures it)
or a least similarity to the reference. The score is the mean over the criteria of 1 inside
each range, falling smoothly outside; molecules with structural alerts or a synthetic
accessibility score above {SA_SCORE_MAX:g} score 0. At least one library molecule meets
every criterion: find one within the experiment budget.
"""

    def random_experiment(self, rng: np.random.Generator) -> LibraryExperiment:
        """A uniform draw in the numeric view: any library molecule, either kind."""
        return Task.random_experiment(self, rng)
