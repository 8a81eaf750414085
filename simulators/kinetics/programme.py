"""Stage programmes: piecewise-constant rate constants, integrated stage by stage.

A temperature (or dosing) programme holds each reactor at one set of rate
constants for a stage, then switches to the next. :func:`integrate_stages`
runs stage s of every reactor in one :func:`~labtwin.simulators.kinetics.integrate`
call and starts stage s + 1 from the concentrations at the end of stage s.
A reactor with fewer stages than the batch gives the rest zero duration: a
zero-length RK4 step adds exactly zero, so its state and result do not depend
on the other reactors.
"""

from __future__ import annotations

import torch

from labtwin.simulators.kinetics.network import ReactionNetwork, Trajectory, integrate


@torch.inference_mode()
def integrate_stages(
    network: ReactionNetwork,
    c0: torch.Tensor,
    k: torch.Tensor,
    durations: torch.Tensor,
    n_steps: int = 2000,
    n_samples: int = 41,
) -> Trajectory:
    """Integrate N reactors through a programme of stages with RK4.

    Args:
        c0: initial concentrations ``(N, S)``.
        k: rate constants of each stage ``(N, n_stages, R)``.
        durations: length of each stage ``(N, n_stages)``; zero for stages a
            reactor does not have.
        n_steps, n_samples: per stage, as in :func:`integrate` (each stage is
            one ``integrate`` call with its own step ``duration / n_steps``).

    Returns:
        The stages' time courses joined end to end: ``times`` run from 0 over
        the whole programme, shape ``(N, 1 + n_stages * (n_samples - 1))`` (the
        first sample of each later stage repeats the last of the one before and
        is dropped); ``concentrations`` ``(N, same, S)``; ``final`` ``(N, S)``.
        A reactor with ``m`` stages has its course in the first
        ``1 + m * (n_samples - 1)`` samples; the rest repeat its final state.
    """
    if k.ndim != 3 or durations.shape != k.shape[:2] or c0.shape[0] != k.shape[0]:
        raise ValueError(
            f"expected c0 (N, S), k (N, n_stages, R) and durations (N, n_stages); got "
            f"{tuple(c0.shape)}, {tuple(k.shape)} and {tuple(durations.shape)}"
        )
    if bool((durations < 0).any()):
        raise ValueError("stage durations must be non-negative")
    start = torch.zeros_like(durations[:, 0])
    c = c0
    times, concentrations = [], []
    for stage in range(k.shape[1]):
        course = integrate(network, c, k[:, stage], durations[:, stage], n_steps, n_samples)
        skip = 0 if stage == 0 else 1
        times.append(start.unsqueeze(1) + course.times[:, skip:])
        concentrations.append(course.concentrations[:, skip:])
        start = start + durations[:, stage]
        c = course.final
    return Trajectory(
        times=torch.cat(times, dim=1), concentrations=torch.cat(concentrations, dim=1), final=c
    )
