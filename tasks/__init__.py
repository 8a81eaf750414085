"""The lab catalog: one module per family of lab protocols.

- :mod:`labtwin.tasks.reactor` — batch reactor (BatchReactor-v1) and an
  activation-energy determination with a final answer (ArrheniusFit-v1).
- :mod:`labtwin.tasks.reactor_protocol` — the batch reactor run by a temperature
  programme, a text lab (ReactorProtocol-v1).
- :mod:`labtwin.tasks.md_eos` — Lennard-Jones equation of state on an isotherm
  (LJEquationOfState-v2), with an isotherm-fit analysis tool and a final answer.
- :mod:`labtwin.tasks.md_cluster` — annealing schedules for LJ13 and LJ38
  clusters (LJClusterAnneal-v0, LJ38ClusterAnneal-v0).
- :mod:`labtwin.tasks.md_water` — TIP3P water density with OpenMM (WaterDensity-v2).
- :mod:`labtwin.tasks.chem_design` — molecules (SMILES) against a drug-like property
  profile, measured by RDKit and GFN2-xTB (MoleculeDesign-v2), a text lab.
- :mod:`labtwin.tasks.chem_library` — the same profiles with the molecule picked from a
  library as a choice (MoleculeLibrary-v3), a numeric lab.
- :mod:`labtwin.tasks.combustion` — a target ignition delay of a premixed gas in a
  constant-pressure reactor, Cantera with GRI-Mech 3.0 (IgnitionDelay-v1).
- :mod:`labtwin.tasks.materials_alloy` — a stable binary alloy of the EMT metals with a
  target lattice constant, relaxed on the batched Warp EMT engine, pymatgen structures, placed
  on a convex hull (AlloyDesign-v2).
- :mod:`labtwin.tasks.chem_synthesis` — make a target molecule from purchasable building
  blocks with named RDKit reaction templates (SynthesisPlanning-v1), a text lab.

Labs register themselves with :func:`labtwin.register_task`; installed labs are
also advertised through the ``labtwin.tasks`` entry points in pyproject.toml.
"""
