"""Pictures of labs and runs; rendering observes and never runs physics.

- :mod:`labtwin.rendering.plots` — campaign progress (best score vs experiments)
  and reactor time courses from a recorded run (matplotlib PNGs);
- :mod:`labtwin.rendering.viewer` — the live web viewer of a run (``labtwin view``):
  campaigns, training metrics, 3D structures, transcripts;
- :mod:`labtwin.rendering.report` — the same views as one self-contained HTML file
  (``labtwin report``);
- :mod:`labtwin.rendering.notebook` — inline HTML of runs, campaigns, measurements
  and labs in Jupyter;
- ``assets/`` — the vendored 3Dmol.js and uPlot (with their licences) and the viewer's
  own script and style.
"""
