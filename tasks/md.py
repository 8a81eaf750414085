"""Molecular-dynamics labs, and the closeness score they share.

- :mod:`labtwin.tasks.md_eos` — ``LJEquationOfState-v2``: pressure and energy of the
  Lennard-Jones fluid at a chosen state; find the density that gives a target pressure
  on an isotherm of a fluid whose well depth is hidden per campaign (final answer checked
  against the Johnson-Zollweg-Gubbins EOS in that fluid's units).
- :mod:`labtwin.tasks.md_cluster` — ``LJClusterAnneal-v0`` (LJ13) and
  ``LJ38ClusterAnneal-v0``: anneal a Lennard-Jones cluster, quench, and approach the
  known global minimum.
- :mod:`labtwin.tasks.md_water` — ``WaterDensity-v2``: reach a target TIP3P water density
  by choosing temperature and pressure (OpenMM, short NPT runs).

Importing this module registers all of them.
"""

from __future__ import annotations

from labtwin.tasks.md_cluster import LJ38ClusterAnneal, LJClusterAnneal
from labtwin.tasks.md_common import target_closeness
from labtwin.tasks.md_eos import LJEquationOfState
from labtwin.tasks.md_water import WaterDensity

__all__ = [
    "LJ38ClusterAnneal",
    "LJClusterAnneal",
    "LJEquationOfState",
    "WaterDensity",
    "target_closeness",
]
