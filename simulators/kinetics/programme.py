"""Stage programmes: piecewise-constant rate constants, integrated stage by stage.

A temperature (or dosing) programme holds each reactor at one set of rate
constants for a stage, then switches to the next. :func:`integrate_stages`
runs stage s of every reactor in one :func:`~labtwin.simulators.kinetics.integrate`
call and starts stage s + 1 from the concentrations at the end of stage s.
A reactor with fewer stages than the batch gives the rest zero duration: a
zero-length stage takes no step and leaves the state exactly as it was, so a
reactor's state and result do not depend on the other reactors.
"""

from __future__ import annotations

import warnings

import torch

from labtwin.simulators.kinetics.network import (
    ATOL,
    MAX_STEPS,
    RTOL,
    ReactionNetwork,
    Trajectory,
    integrate,
)


@torch.inference_mode()
def integrate_stages(
    network: ReactionNetwork,
    c0: torch.Tensor,
    k: torch.Tensor,
    durations: torch.Tensor,
    n_steps: int | None = None,
    n_samples: int = 41,
    *,
    rtol: float = RTOL,
    atol: float = ATOL,
    max_steps: int = MAX_STEPS,
) -> Trajectory:
    """Integrate N reactors through a programme of stages, each stage one :func:`integrate`.

    Args:
        c0: initial concentrations ``(N, S)``.
        k: rate constants of each stage ``(N, n_stages, R)``.
        durations: length of each stage ``(N, n_stages)``; zero for stages a
            reactor does not have.
        n_steps: deprecated and ignored, as in :func:`integrate`.
        n_samples, rtol, atol, max_steps: per stage, as in :func:`integrate` (each
            stage starts its step control afresh).

    Returns:
        The stages' time courses joined end to end: ``times`` run from 0 over
        the whole programme, shape ``(N, 1 + n_stages * (n_samples - 1))`` (the
        first sample of each later stage repeats the last of the one before and
        is dropped); ``concentrations`` ``(N, same, S)``; ``final`` ``(N, S)``.
        A reactor with ``m`` stages has its course in the first
        ``1 + m * (n_samples - 1)`` samples; the rest repeat its final state.
        ``steps`` and ``rejected`` add up the stages'; ``failed`` is any stage's.
    """
    if k.ndim != 3 or durations.shape != k.shape[:2] or c0.shape[0] != k.shape[0]:
        raise ValueError(
            f"expected c0 (N, S), k (N, n_stages, R) and durations (N, n_stages); got "
            f"{tuple(c0.shape)}, {tuple(k.shape)} and {tuple(durations.shape)}"
        )
    if n_steps is not None:
        warnings.warn(
            "integrate_stages(n_steps=...) is deprecated and ignored: the step is adaptive",
            DeprecationWarning,
            stacklevel=2,
        )
    if bool((durations < 0).any()):
        raise ValueError("stage durations must be non-negative")
    start = torch.zeros_like(durations[:, 0])
    c = c0
    times, concentrations = [], []
    steps = torch.zeros(c0.shape[0], dtype=torch.int32, device=c0.device)
    rejected, failed = steps.clone(), torch.zeros_like(steps, dtype=torch.bool)
    settings = dict(rtol=rtol, atol=atol, max_steps=max_steps)
    for stage in range(k.shape[1]):
        course = integrate(
            network, c, k[:, stage], durations[:, stage], n_samples=n_samples, **settings
        )
        skip = 0 if stage == 0 else 1
        times.append(start.unsqueeze(1) + course.times[:, skip:])
        concentrations.append(course.concentrations[:, skip:])
        start = start + durations[:, stage]
        c = course.final
        steps, rejected = steps + course.steps, rejected + course.rejected
        failed = failed | course.failed
    return Trajectory(
        times=torch.cat(times, dim=1),
        concentrations=torch.cat(concentrations, dim=1),
        final=c,
        steps=steps,
        rejected=rejected,
        failed=failed,
    )
