"""Evaluation of agents the way the RL-scaling literature reports it.

- ``estimators`` — unbiased pass@k and pass^k from ``n`` samples per campaign, and their
  means over campaigns;
- ``efficiency`` — sample-efficiency curves: the mean best measured score against
  experiments spent and against cost, each with its area;
- ``compute_fit`` — reward against training compute,
  ``R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)``, fitted with uncertainties; ``scaling``
  reads a training run's checkpoint evaluations and fits them;
- ``config`` and ``driver`` — ``labtwin eval``: policies (a trained run or checkpoint, a
  local model, the untrained policy) and the baselines on fixed held-out campaign seeds,
  with the hack rate on a lab's impossible variant;
- ``plots`` and ``report`` — the PNG figures, and the static HTML page comparing runs.

Nothing is imported here, so that the command line can read ``config`` without numpy's
heavier neighbours (scipy, torch).
"""
