"""Batched Verlet neighbour lists on Warp devices, one implementation for every engine.

:class:`NeighbourLists` (``lists.py``) owns a batch's rows, reference positions, rebuild
flags, skin test, cell lists and capacity; its kernels are in ``_kernels.py``. The
Lennard-Jones MD engine (:mod:`labtwin.simulators.md.lj_warp`) and the EMT engine
(:mod:`labtwin.simulators.materials.emt_warp`) both build their lists here. Warp is imported
lazily: importing this package does not initialise it.
"""

from labtwin.simulators.neighbours.lists import NeighbourLists

__all__ = ["NeighbourLists"]
