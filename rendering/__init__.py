"""Pictures of labs and runs; rendering observes and never runs physics.

- :mod:`labtwin.rendering.plots` — campaign progress (best score vs experiments)
  and reactor time courses from a recorded run.
"""
