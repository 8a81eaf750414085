"""Molecular dynamics engines for labtwin.

- ``state``: :class:`MDState`, many independent small systems batched in one set of arrays.
- ``build``: initial states (FCC fluid boxes, LJ clusters, Maxwell-Boltzmann velocities).
- ``lj_warp``: batched Lennard-Jones MD and quenches in NVIDIA Warp (CUDA or CPU), one
  kernel launch per stage for all systems; :func:`run_lj` returns block-averaged observables.
- ``openmm_engine``: the same LJ fluid in OpenMM (cross-check) and a TIP3P water box NPT protocol.
- ``observables``: block averages, LJ tail corrections, g(r) normalisation, diffusion fits.
- ``eos``: the Johnson-Zollweg-Gubbins (1993) Lennard-Jones equation of state.

Units: LJ code works in reduced units (epsilon = sigma = mass = k_B = 1); OpenMM code in
OpenMM units (nm, ps, kJ/mol, amu, K, bar). Heavy libraries (warp, openmm) import lazily.
"""

from labtwin.simulators.md.state import MDState

__all__ = ["MDState"]
