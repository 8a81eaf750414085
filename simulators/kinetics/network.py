"""Mass-action reaction networks integrated for many reactors at once.

Concentrations are in mol/L and times in the unit the rate constants use
(the reactor lab uses minutes). State is a ``(N, S)`` tensor: N reactors, S
species; rate constants are ``(N, R)`` for R reactions. One call of
:func:`integrate` integrates all reactors in one Warp kernel launch, one thread
per reactor, on the tensors' device (CPU or CUDA): Dormand-Prince 5(4) with each
reactor's own adaptive step, landing exactly on every sample time
(:mod:`~labtwin.simulators.kinetics._kernels`). A thread touches only its own
reactor, so a reactor's result does not depend on the others in the batch (to the
last bit) and the same input gives the same output.

Accuracy at the default tolerances (``rtol`` 1e-9, ``atol`` 1e-12 mol/L), measured
by ``tests/simulators/test_kinetics.py``: over A -> B -> C with k1 from 1e-3 to
5 /min, k2 from 1e-5 to 0.5 /min and times to 180 min (the reactor labs' range and
beyond), the worst error at any sample is 7.6e-11 of the feed, and the worst relative
error 1.2e-8 where the exact concentration is at least 1e-4 of the feed; on the labs'
network, runs agree with scipy's LSODA at rtol 1e-10 to 1e-10 of the feed, the
reference's own error. (The fixed-step RK4 it replaces, 1000 steps a run, was at
5.1e-7 of the feed and 7.8e-4 relative.)
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch

GAS_CONSTANT = 8.314462618  # J / (mol K), CODATA 2018 exact


def default_device() -> torch.device:
    """CUDA when torch sees a GPU, else CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def arrhenius(
    prefactor: torch.Tensor, activation_energy: torch.Tensor, temperature: torch.Tensor
) -> torch.Tensor:
    """k = A exp(-Ea / (R T)); ``activation_energy`` in J/mol, ``temperature`` in K."""
    return prefactor * torch.exp(-activation_energy / (GAS_CONSTANT * temperature))


@dataclass(frozen=True)
class Reaction:
    """A mass-action step: ``reactants`` and ``products`` map species to stoichiometric coefficients.

    The rate is ``k * prod(c[s] ** order[s])`` with orders equal to the reactant
    coefficients (an elementary step).
    """

    reactants: dict[str, int]
    products: dict[str, int]

    def __str__(self) -> str:
        def side(d: dict[str, int]) -> str:
            return " + ".join(f"{n if n > 1 else ''}{s}" for s, n in d.items()) or "0"

        return f"{side(self.reactants)} -> {side(self.products)}"


@dataclass(frozen=True)
class ReactionNetwork:
    species: tuple[str, ...]
    reactions: tuple[Reaction, ...]

    def stoichiometry(self, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        """Net stoichiometric matrix ``(R, S)``: products minus reactants."""
        nu = torch.zeros(len(self.reactions), len(self.species), dtype=dtype, device=device)
        for r, reaction in enumerate(self.reactions):
            for s, n in reaction.reactants.items():
                nu[r, self.species.index(s)] -= n
            for s, n in reaction.products.items():
                nu[r, self.species.index(s)] += n
        return nu

    def reactant_index(self, device: torch.device) -> torch.Tensor:
        """Species index of each reactant molecule ``(R, m)``, padded with ``S``.

        A reaction ``2A + B -> ...`` lists A twice and B once; the padding index
        ``S`` points at a column of ones, so a rate is ``k * prod(c_pad[:, idx])``.
        """
        counts = [
            [self.species.index(s) for s, n in r.reactants.items() for _ in range(n)]
            for r in self.reactions
        ]
        width = max(1, max(len(c) for c in counts))
        pad = len(self.species)
        rows = [c + [pad] * (width - len(c)) for c in counts]
        return torch.tensor(rows, dtype=torch.long, device=device)

    @staticmethod
    def rates(c: torch.Tensor, k: torch.Tensor, reactant_index: torch.Tensor) -> torch.Tensor:
        """Mass-action rates ``(N, R)`` for concentrations ``(N, S)``."""
        padded = torch.cat([c, torch.ones_like(c[:, :1])], dim=1)
        return k * padded[:, reactant_index].prod(dim=2)


#: default tolerances of :func:`integrate`: relative, and absolute in mol/L (per species, on
#: the RMS error estimate of each step; see the module doc for what they give)
RTOL = 1e-9
ATOL = 1e-12
MAX_STEPS = 100_000  # per reactor; a run needing more is reported as failed (NaN)
#: stated error of a concentration integrated at the default tolerances, as a fraction of
#: the feed: ten times the worst measured over the labs' range of rate constants and times
#: (1e-10, module doc), so a test that compares two integrations can name its bound
INTEGRATION_ERROR = 1e-9


@dataclass
class Trajectory:
    """Result of :func:`integrate`.

    ``times`` ``(N, n_samples)`` and ``concentrations`` ``(N, n_samples, S)``
    sample each reactor's course evenly from 0 to its ``t_end`` (the last time is
    ``t_end`` exactly); ``final`` is ``(N, S)``. ``steps`` and ``rejected`` count
    each reactor's accepted and rejected steps; ``failed`` marks reactors whose
    integration gave up (more than ``max_steps`` steps, or a state that stopped
    being finite): their course is NaN from that sample on.
    """

    times: torch.Tensor
    concentrations: torch.Tensor
    final: torch.Tensor
    steps: torch.Tensor | None = None
    rejected: torch.Tensor | None = None
    failed: torch.Tensor | None = None


#: kernel constants of the networks integrated so far, keyed by the network's repr (a
#: ReactionNetwork holds dicts, so it is not hashable; its repr names every coefficient)
_CONSTANTS: dict[str, tuple[tuple, tuple]] = {}


def _constants(network: ReactionNetwork) -> tuple[tuple, tuple]:
    """The network's stoichiometry (R rows of S floats) and reactant index (R rows), as
    :meth:`ReactionNetwork.stoichiometry` and :meth:`~ReactionNetwork.reactant_index` give
    them, as tuples: the constants its kernel is generated from."""
    key = repr(network)
    if key not in _CONSTANTS:
        cpu = torch.device("cpu")
        stoichiometry = network.stoichiometry(cpu, torch.float64).tolist()
        reactants = network.reactant_index(cpu).tolist()
        _CONSTANTS[key] = tuple(map(tuple, stoichiometry)), tuple(map(tuple, reactants))
    return _CONSTANTS[key]


def _warp_device(device: torch.device) -> str:
    if device.type == "cuda":
        return f"cuda:{device.index if device.index is not None else torch.cuda.current_device()}"
    if device.type != "cpu":
        raise ValueError(f"the kinetics kernel runs on CPU or CUDA, not {device}")
    return "cpu"


@torch.inference_mode()
def integrate(
    network: ReactionNetwork,
    c0: torch.Tensor,
    k: torch.Tensor,
    t_end: torch.Tensor,
    n_steps: int | None = None,
    n_samples: int = 41,
    *,
    rtol: float = RTOL,
    atol: float = ATOL,
    max_steps: int = MAX_STEPS,
) -> Trajectory:
    """Integrate dc/dt = nu^T rate(c) for N reactors, each with its own adaptive step.

    One Warp kernel launch, one thread per reactor, in float64 (Dormand-Prince
    5(4), :mod:`~labtwin.simulators.kinetics._kernels`), on the device of ``c0``.

    Args:
        c0: initial concentrations ``(N, S)``.
        k: rate constants ``(N, R)``.
        t_end: reaction time of each reactor ``(N,)``, non-negative.
        n_steps: deprecated and ignored (the step is adaptive); a warning says so.
        n_samples: points kept for the time course, evenly spaced from 0 to ``t_end``;
            the step lands on each.
        rtol, atol: error tolerances of each step, relative and absolute (mol/L).
        max_steps: steps (accepted and rejected) allowed per reactor.
    """
    if n_steps is not None:
        warnings.warn(
            "integrate(n_steps=...) is deprecated and ignored: the step is adaptive (rtol, atol)",
            DeprecationWarning,
            stacklevel=2,
        )
    if n_samples < 2:
        raise ValueError("n_samples must be at least 2")
    if not bool(torch.isfinite(t_end).all()) or bool((t_end < 0).any()):
        raise ValueError("reaction times t_end must be finite and non-negative")
    n_reactors, n_species = c0.shape
    if n_species != len(network.species) or k.shape != (n_reactors, len(network.reactions)):
        raise ValueError(
            f"expected c0 (N, {len(network.species)}) and k (N, {len(network.reactions)}); "
            f"got {tuple(c0.shape)} and {tuple(k.shape)}"
        )
    if t_end.shape != (n_reactors,):
        raise ValueError(f"expected t_end ({n_reactors},); got {tuple(t_end.shape)}")
    device, f64 = c0.device, torch.float64
    from labtwin.simulators.kinetics import _kernels  # imports and starts Warp

    stoichiometry, reactants = _constants(network)
    inputs = torch.cat([c0.to(f64), k.to(f64), t_end.to(f64).unsqueeze(1)], dim=1).contiguous()
    samples = torch.empty(n_reactors, n_samples, n_species + 1, dtype=f64, device=device)
    counts = torch.empty(n_reactors, 3, dtype=torch.int32, device=device)
    if n_reactors:
        _kernels.dopri5(
            stoichiometry,
            reactants,
            _warp_device(device),
            (inputs, samples, counts),
            (rtol, atol, max_steps),
        )
    return Trajectory(
        times=samples[..., n_species],
        concentrations=samples[..., :n_species],
        final=samples[:, -1, :n_species],
        steps=counts[:, 0],
        rejected=counts[:, 1],
        failed=counts[:, 2].bool(),
    )
