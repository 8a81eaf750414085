"""Crystals and alloys with pymatgen, ASE and EMT (Effective Medium Theory).

- :mod:`~labtwin.simulators.materials.structure` — :class:`Structure` (species, Cartesian
  positions, a 3x3 cell: the plain arrays a batched engine can stack), built with pymatgen
  (fcc/bcc/hcp prototypes, supercells, ordered or random substitutional decorations,
  vacancies) and converted to ASE ``Atoms`` and pymatgen ``Structure`` at the edges;
- :mod:`~labtwin.simulators.materials.emt` — the EMT calculator (asap3's compiled EMT, or
  ASE's own with asap's cutoff; the two agree to 1e-7 eV/atom);
- :mod:`~labtwin.simulators.materials.relax` — relaxation of positions and cell (FIRE on a
  unit-cell or Frechet cell filter) with stated force and stress tolerances, and
  ``relax_many``: many cells in one batched relaxation on the Warp engine;
- :mod:`~labtwin.simulators.materials.eos` — equation of state: equilibrium volume and bulk
  modulus from a Birch-Murnaghan fit;
- :mod:`~labtwin.simulators.materials.hull` — elemental references, formation energies and
  the energy above the convex hull with pymatgen's ``PhaseDiagram``;
- :mod:`~labtwin.simulators.materials.alloy` — measurements of binary alloys: build,
  relax, fit, place on the hull (``measure_alloys``: a batch on the Warp engine);
- :mod:`~labtwin.simulators.materials.emt_warp` — batched EMT in Warp kernels
  (:mod:`._emt_kernels`): energies, forces, stresses and FIRE relaxations of many cells in
  one launch, ``cuda`` or ``cpu``; its batch, ``CrystalBatch``, is the MD engine's
  ``MDState`` carrying species and 3x3 cells;
- :mod:`~labtwin.simulators.materials.bulk` — cubic crystals (fcc metals, L1_2 alloys) on
  the Warp engine: energy and pressure against lattice constant, the zero-pressure lattice
  constant, converged Birch-Murnaghan references;
- :mod:`~labtwin.simulators.materials.vacancy` — vacancy formation energies, many
  relaxation protocols in one batch, and their dilute-limit reference;
- :mod:`~labtwin.simulators.materials.surface` — (100), (110), (111) slabs (pymatgen's
  ``SlabGenerator``) and their surface energies, many slabs relaxed in one batch.

ASE, asap3, pymatgen and Warp are imported inside the functions that use them.
"""

from labtwin.simulators.materials.alloy import (
    AlloyResult,
    AlloySpec,
    measure_alloy,
    measure_alloys,
)
from labtwin.simulators.materials.bulk import (
    CUBIC_CRYSTALS,
    cubic_cell,
    evaluate_lattice_constants,
    fit_birch_murnaghan,
    reference_equation_of_state,
    zero_pressure_lattice_constant,
)
from labtwin.simulators.materials.emt import EMT_ELEMENTS, emt_backend, make_calculator
from labtwin.simulators.materials.emt_warp import (
    CrystalBatch,
    WarpEMT,
    emt_evaluate,
    relax_emt,
)
from labtwin.simulators.materials.eos import EOSResult, fit_equation_of_state
from labtwin.simulators.materials.hull import (
    HullReference,
    e_above_hull,
    elemental_reference,
    formation_energy_per_atom,
    reference_hull,
)
from labtwin.simulators.materials.relax import RelaxResult, relax, relax_many
from labtwin.simulators.materials.structure import (
    LATTICES,
    Structure,
    decorate,
    prototype,
    remove_sites,
    supercell,
)
from labtwin.simulators.materials.vacancy import (
    VacancyProtocol,
    VacancyResult,
    converged_formation_energy,
    measure_vacancies,
)

__all__ = [
    "CUBIC_CRYSTALS",
    "EMT_ELEMENTS",
    "LATTICES",
    "AlloyResult",
    "AlloySpec",
    "CrystalBatch",
    "EOSResult",
    "HullReference",
    "RelaxResult",
    "Structure",
    "VacancyProtocol",
    "VacancyResult",
    "WarpEMT",
    "converged_formation_energy",
    "cubic_cell",
    "decorate",
    "e_above_hull",
    "elemental_reference",
    "emt_backend",
    "emt_evaluate",
    "evaluate_lattice_constants",
    "fit_birch_murnaghan",
    "fit_equation_of_state",
    "formation_energy_per_atom",
    "make_calculator",
    "measure_alloy",
    "measure_alloys",
    "measure_vacancies",
    "prototype",
    "reference_equation_of_state",
    "reference_hull",
    "relax",
    "relax_emt",
    "relax_many",
    "remove_sites",
    "supercell",
    "zero_pressure_lattice_constant",
]
