"""Simulation engines behind the labs; one subpackage per backend.

- :mod:`labtwin.simulators.kinetics` — batched chemical kinetics in torch (CPU or CUDA).
- :mod:`labtwin.simulators.md` — molecular dynamics: batched Lennard-Jones in warp-lang
  (CPU or CUDA) and TIP3P water in OpenMM.
- :mod:`labtwin.simulators.chem` — molecules: RDKit parsing, descriptors, conformers and
  reaction templates, GFN2-xTB through tblite, in worker processes with a cache.
- :mod:`labtwin.simulators.combustion` — ignition in Cantera (GRI-Mech 3.0) in worker
  processes.
- :mod:`labtwin.simulators.materials` — crystals: pymatgen structures, EMT (asap3 or ASE)
  relaxations, equations of state and convex hulls.

Engines compute physics only: they never compute rewards. Heavy libraries are
imported lazily inside each backend.
"""
