"""Imported once by the molecule workers' forkserver (:mod:`~labtwin.simulators.chem.workers`),
so that every worker forked from it starts with RDKit, tblite and the SA-score fragment
table loaded. ``OMP_NUM_THREADS=1`` is set before tblite's OpenMP runtime loads: one thread
keeps xTB's sums, and so its results, the same in every worker."""

import os

os.environ["OMP_NUM_THREADS"] = "1"

from labtwin.simulators.chem.engine import warm_up  # noqa: E402

warm_up()
