"""Mass-action reaction networks integrated for many reactors at once.

Concentrations are in mol/L and times in the unit the rate constants use
(the reactor lab uses minutes). State is a ``(N, S)`` tensor: N reactors, S
species; rate constants are ``(N, R)`` for R reactions. One call integrates
all reactors with classical fixed-step RK4, each with its own step
``t_end / n_steps``. Every operation is elementwise over reactors, so a
reactor's result does not depend on the others in the batch.
"""

from __future__ import annotations

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


@dataclass
class Trajectory:
    """Result of :func:`integrate`.

    ``times`` ``(N, n_samples)`` and ``concentrations`` ``(N, n_samples, S)``
    sample each reactor's course evenly from 0 to its ``t_end``; ``final`` is ``(N, S)``.
    """

    times: torch.Tensor
    concentrations: torch.Tensor
    final: torch.Tensor


@torch.inference_mode()
def integrate(
    network: ReactionNetwork,
    c0: torch.Tensor,
    k: torch.Tensor,
    t_end: torch.Tensor,
    n_steps: int = 2000,
    n_samples: int = 41,
) -> Trajectory:
    """Integrate dc/dt = nu^T rate(c) for N reactors with RK4.

    Args:
        c0: initial concentrations ``(N, S)``.
        k: rate constants ``(N, R)``.
        t_end: reaction time of each reactor ``(N,)``.
        n_steps: RK4 steps per reactor; the step is ``t_end / n_steps``
            (keep ``k * t_end / n_steps`` below about 1 for accuracy).
        n_samples: points kept for the time course (``n_steps`` must be a
            multiple of ``n_samples - 1``).
    """
    if n_steps % (n_samples - 1):
        raise ValueError("n_steps must be a multiple of n_samples - 1")
    device, dtype = c0.device, c0.dtype
    nu = network.stoichiometry(device, dtype)
    index = network.reactant_index(device)
    dt = (t_end / n_steps).unsqueeze(1)

    def derivative(c: torch.Tensor) -> torch.Tensor:
        return network.rates(c, k, index) @ nu

    c = c0.clone()
    every = n_steps // (n_samples - 1)
    samples = [c0.clone()]
    for step in range(1, n_steps + 1):
        k1 = derivative(c)
        k2 = derivative(c + 0.5 * dt * k1)
        k3 = derivative(c + 0.5 * dt * k2)
        k4 = derivative(c + dt * k3)
        c = c + dt / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
        if step % every == 0:
            samples.append(c.clone())
    times = torch.linspace(0.0, 1.0, n_samples, device=device, dtype=dtype) * t_end.unsqueeze(1)
    return Trajectory(times=times, concentrations=torch.stack(samples, dim=1), final=c)
