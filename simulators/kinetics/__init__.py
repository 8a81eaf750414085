"""Batched chemical kinetics in torch.

- :class:`ReactionNetwork` — species and mass-action reactions,
- :func:`arrhenius` — rate constants from prefactors and activation energies,
- :func:`integrate` — adaptive Dormand-Prince 5(4) for N reactors in one Warp kernel
  launch, one thread per reactor (CPU or CUDA),
- :func:`integrate_stages` — the same through a programme of stages (piecewise-constant k),
- :func:`consecutive_first_order` — the analytic solution of A -> B -> C,
- :mod:`~labtwin.simulators.kinetics.reference` — scipy's stiff solvers on the same
  mass-action ODE (``solve_stages``), an independent reference for the engine.
"""

from labtwin.simulators.kinetics.analytic import consecutive_first_order
from labtwin.simulators.kinetics.network import (
    GAS_CONSTANT,
    Reaction,
    ReactionNetwork,
    Trajectory,
    arrhenius,
    default_device,
    integrate,
)
from labtwin.simulators.kinetics.programme import integrate_stages

__all__ = [
    "GAS_CONSTANT",
    "Reaction",
    "ReactionNetwork",
    "Trajectory",
    "arrhenius",
    "consecutive_first_order",
    "default_device",
    "integrate",
    "integrate_stages",
]
