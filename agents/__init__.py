"""Agents that run labs.

- :mod:`labtwin.agents.baselines` — random search, CMA-ES and Bayesian
  optimisation over a lab's numeric view (reference scores per budget).
"""
