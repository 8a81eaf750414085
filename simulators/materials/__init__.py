"""Crystals and alloys with pymatgen, ASE and EMT (Effective Medium Theory).

- :mod:`~labtwin.simulators.materials.structure` — :class:`Structure` (species, Cartesian
  positions, a 3x3 cell: the plain arrays a batched engine can stack), built with pymatgen
  (fcc/bcc/hcp prototypes, supercells, ordered or random substitutional decorations,
  vacancies) and converted to ASE ``Atoms`` and pymatgen ``Structure`` at the edges;
- :mod:`~labtwin.simulators.materials.emt` — the EMT calculator (asap3's compiled EMT, or
  ASE's own with asap's cutoff; the two agree to 1e-7 eV/atom);
- :mod:`~labtwin.simulators.materials.relax` — relaxation of positions and cell (FIRE on a
  ``FrechetCellFilter``) with stated force and stress tolerances;
- :mod:`~labtwin.simulators.materials.eos` — equation of state: equilibrium volume and bulk
  modulus from a Birch-Murnaghan fit;
- :mod:`~labtwin.simulators.materials.hull` — elemental references, formation energies and
  the energy above the convex hull with pymatgen's ``PhaseDiagram``;
- :mod:`~labtwin.simulators.materials.alloy` — one measurement of a binary alloy: build,
  relax, fit, place on the hull.

ASE, asap3 and pymatgen are imported inside the functions that use them.
"""

from labtwin.simulators.materials.alloy import AlloyResult, AlloySpec, measure_alloy
from labtwin.simulators.materials.emt import EMT_ELEMENTS, emt_backend, make_calculator
from labtwin.simulators.materials.eos import EOSResult, fit_equation_of_state
from labtwin.simulators.materials.hull import (
    HullReference,
    e_above_hull,
    elemental_reference,
    formation_energy_per_atom,
    reference_hull,
)
from labtwin.simulators.materials.relax import RelaxResult, relax
from labtwin.simulators.materials.structure import (
    LATTICES,
    Structure,
    decorate,
    prototype,
    remove_sites,
    supercell,
)

__all__ = [
    "EMT_ELEMENTS",
    "LATTICES",
    "AlloyResult",
    "AlloySpec",
    "EOSResult",
    "HullReference",
    "RelaxResult",
    "Structure",
    "decorate",
    "e_above_hull",
    "elemental_reference",
    "emt_backend",
    "fit_equation_of_state",
    "formation_energy_per_atom",
    "make_calculator",
    "measure_alloy",
    "prototype",
    "reference_hull",
    "relax",
    "remove_sites",
    "supercell",
]
