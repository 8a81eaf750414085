"""Molecules with RDKit and GFN2-xTB (tblite), measured in worker processes and cached.

- :mod:`~labtwin.simulators.chem.molecule` — parse, sanitise, canonicalise and screen
  SMILES (RDKit's own messages for bad input; metals, isotopes, radicals, charges,
  fragments and size limits; structural alerts);
- :mod:`~labtwin.simulators.chem.descriptors` — RDKit descriptors, QED, SA score and
  Morgan-fingerprint Tanimoto similarity;
- :mod:`~labtwin.simulators.chem.conformers` — ETKDG conformers and MMFF94 energies;
- :mod:`~labtwin.simulators.chem.xtb` — GFN2-xTB single points through tblite;
- :mod:`~labtwin.simulators.chem.workers` — a process pool (forkserver), one molecule per job
  with a timeout (short jobs several to a message), crashed or stalled workers replaced;
- :mod:`~labtwin.simulators.chem.engine` — :class:`MoleculeEngine`: batches, the caches;
- :mod:`~labtwin.simulators.chem.reactions` — named reaction templates (RDKit reaction
  SMARTS) applied to reagents, with a deterministic yield model;
- :mod:`~labtwin.simulators.chem.reaction_energy` — GFN2-xTB reaction energies (products
  minus reagents, element balance checked) from the engine's xTB measurements.

RDKit and tblite are imported inside the functions that use them.
"""

from labtwin.simulators.chem.engine import (
    KINDS,
    UNITS,
    MoleculeEngine,
    MoleculeResult,
    MoleculeSettings,
    measure_job,
)
from labtwin.simulators.chem.molecule import Limits, parse_smiles
from labtwin.simulators.chem.reaction_energy import ReactionEnergy, balance_template
from labtwin.simulators.chem.reactions import (
    BY_PRODUCTS,
    TEMPLATES,
    ReactionOutcome,
    run_reaction,
)

__all__ = [
    "BY_PRODUCTS",
    "KINDS",
    "UNITS",
    "Limits",
    "MoleculeEngine",
    "MoleculeResult",
    "MoleculeSettings",
    "ReactionEnergy",
    "ReactionOutcome",
    "TEMPLATES",
    "balance_template",
    "measure_job",
    "parse_smiles",
    "run_reaction",
]
