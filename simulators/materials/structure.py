"""Crystal structures as plain arrays, built with pymatgen.

A :class:`Structure` is species, Cartesian positions (Å) and a 3x3 cell (rows are the
lattice vectors, Å), plus the sublattice label of each site: the same fields for one cell
or, stacked with a system index, for a batch of cells (what a batched EMT engine needs).
Builders go through pymatgen; :meth:`Structure.to_ase` / :meth:`Structure.from_ase` and
:meth:`Structure.to_pymatgen` / :meth:`Structure.from_pymatgen` convert at the edges
(``pymatgen.io.ase.AseAtomsAdaptor`` for ASE).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

Lattice = Literal["fcc", "bcc", "hcp"]
LATTICES: tuple[str, ...] = ("fcc", "bcc", "hcp")

#: fractional coordinates of the conventional cells; each site is its own sublattice
_SITES = {
    "fcc": ((0.0, 0.0, 0.0), (0.5, 0.5, 0.0), (0.5, 0.0, 0.5), (0.0, 0.5, 0.5)),
    "bcc": ((0.0, 0.0, 0.0), (0.5, 0.5, 0.5)),
    "hcp": ((1 / 3, 2 / 3, 0.25), (2 / 3, 1 / 3, 0.75)),
}
#: atoms per conventional cell: volume per atom = cell volume / this
ATOMS_PER_CELL = {name: len(sites) for name, sites in _SITES.items()}
IDEAL_C_OVER_A = math.sqrt(8.0 / 3.0)


@dataclass(frozen=True)
class Structure:
    """One periodic cell: ``species`` (n,), ``positions`` (n, 3) Å, ``cell`` (3, 3) Å (rows).

    ``sublattice`` (n,) labels the site of the conventional cell each atom sits on (how
    ordered decorations choose sites); it travels through supercells and is -1 when unknown.
    """

    species: tuple[str, ...]
    positions: np.ndarray
    cell: np.ndarray
    sublattice: np.ndarray = field(default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        positions = np.asarray(self.positions, dtype=np.float64).reshape(-1, 3)
        cell = np.asarray(self.cell, dtype=np.float64).reshape(3, 3)
        n = len(self.species)
        sublattice = (
            np.full(n, -1, dtype=np.int64)
            if self.sublattice is None
            else np.asarray(self.sublattice, dtype=np.int64).reshape(-1)
        )
        if positions.shape[0] != n or sublattice.shape[0] != n:
            raise ValueError(
                f"{n} species, {positions.shape[0]} positions, {sublattice.shape[0]} labels"
            )
        object.__setattr__(self, "species", tuple(str(s) for s in self.species))
        object.__setattr__(self, "positions", positions)
        object.__setattr__(self, "cell", cell)
        object.__setattr__(self, "sublattice", sublattice)

    def __len__(self) -> int:
        return len(self.species)

    @property
    def volume(self) -> float:
        """Cell volume, Å^3."""
        return float(abs(np.linalg.det(self.cell)))

    @property
    def volume_per_atom(self) -> float:
        return self.volume / len(self)

    def composition(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for s in self.species:
            out[s] = out.get(s, 0) + 1
        return out

    def min_distance(self) -> float:
        """Shortest interatomic distance under periodic boundaries, Å."""
        from ase.geometry import get_distances

        if len(self) < 2:  # one atom: its shortest distance is to its own images
            lengths = np.linalg.norm(self.cell, axis=1)
            return float(lengths.min())
        _, d = get_distances(self.positions, cell=self.cell, pbc=True)
        d = d + np.diag(np.full(len(self), np.inf))
        return float(d.min())

    # ------------------------------------------------------------ conversions at the edges
    def to_pymatgen(self) -> Any:
        from pymatgen.core import Lattice as PmgLattice
        from pymatgen.core import Structure as PmgStructure

        return PmgStructure(
            PmgLattice(self.cell),
            list(self.species),
            self.positions,
            coords_are_cartesian=True,
            site_properties={"sublattice": [int(x) for x in self.sublattice]},
        )

    @classmethod
    def from_pymatgen(cls, structure: Any) -> Structure:
        labels = structure.site_properties.get("sublattice")
        return cls(
            tuple(site.specie.symbol for site in structure),
            np.array(structure.cart_coords),
            np.array(structure.lattice.matrix),
            None if labels is None else np.array(labels),
        )

    def to_ase(self) -> Any:
        from pymatgen.io.ase import AseAtomsAdaptor

        atoms = AseAtomsAdaptor.get_atoms(self.to_pymatgen())
        atoms.pbc = True
        return atoms

    @classmethod
    def from_ase(cls, atoms: Any, sublattice: np.ndarray | None = None) -> Structure:
        from pymatgen.io.ase import AseAtomsAdaptor

        structure = AseAtomsAdaptor.get_structure(atoms)
        return cls(
            tuple(site.specie.symbol for site in structure),
            np.array(structure.cart_coords),
            np.array(structure.lattice.matrix),
            sublattice,
        )

    def scaled(self, factor: float) -> Structure:
        """The cell and positions scaled by ``factor`` along every axis (volume by factor^3)."""
        return Structure(self.species, self.positions * factor, self.cell * factor, self.sublattice)


def prototype(lattice: Lattice, element: str, volume_per_atom: float) -> Structure:
    """The conventional cell of ``lattice`` filled with ``element`` at ``volume_per_atom`` (Å^3).

    fcc (4 atoms) and bcc (2) are cubic; hcp (2) has the ideal c/a = sqrt(8/3).
    """
    from pymatgen.core import Lattice as PmgLattice
    from pymatgen.core import Structure as PmgStructure

    if lattice not in _SITES:
        raise ValueError(f"unknown lattice {lattice!r}; one of {LATTICES}")
    cell_volume = volume_per_atom * ATOMS_PER_CELL[lattice]
    if lattice == "hcp":
        a = (cell_volume / (math.sqrt(3.0) / 2.0 * IDEAL_C_OVER_A)) ** (1.0 / 3.0)
        pmg_lattice = PmgLattice.hexagonal(a, IDEAL_C_OVER_A * a)
    else:
        pmg_lattice = PmgLattice.cubic(cell_volume ** (1.0 / 3.0))
    sites = _SITES[lattice]
    structure = PmgStructure(
        pmg_lattice,
        [element] * len(sites),
        list(sites),
        site_properties={"sublattice": list(range(len(sites)))},
    )
    return Structure.from_pymatgen(structure)


def supercell(structure: Structure, repeats: int | tuple[int, int, int]) -> Structure:
    """``structure`` repeated ``repeats`` times along each lattice vector (pymatgen)."""
    scaling = (repeats,) * 3 if isinstance(repeats, int) else tuple(repeats)
    pmg = structure.to_pymatgen()
    pmg.make_supercell(scaling)
    return Structure.from_pymatgen(pmg)


def decorate(
    structure: Structure,
    solute: str,
    n_solute: int,
    ordering: Literal["ordered", "random"],
    rng: np.random.Generator | None = None,
) -> Structure:
    """Substitute ``n_solute`` sites of ``structure`` by ``solute``.

    ``"ordered"`` fills whole sublattices in turn (sublattice 0 first, then 1, ...; inside a
    sublattice sites go in order of their fractional coordinates), which gives the classic
    orderings at their compositions: L1_2 (A3B) at 1/4, L1_0 (AB) at 1/2 and L1_2 (AB3) at 3/4
    on fcc, B2 at 1/2 on bcc. ``"random"`` picks the sites with ``rng`` (a seeded generator).
    """
    n = len(structure)
    if not 0 <= n_solute <= n:
        raise ValueError(f"cannot place {n_solute} solute atoms on {n} sites")
    if ordering == "ordered":
        fractional = structure.positions @ np.linalg.inv(structure.cell)
        fractional = np.round(np.mod(fractional, 1.0), 6) % 1.0
        keys = (fractional[:, 2], fractional[:, 1], fractional[:, 0], structure.sublattice)
        chosen = np.lexsort(keys)[:n_solute]
    elif ordering == "random":
        if rng is None:
            raise ValueError("a random ordering needs a seeded generator")
        chosen = rng.choice(n, size=n_solute, replace=False)
    else:
        raise ValueError(f"unknown ordering {ordering!r}")
    species = list(structure.species)
    for i in chosen:
        species[int(i)] = solute
    return Structure(tuple(species), structure.positions, structure.cell, structure.sublattice)


def remove_sites(structure: Structure, indices: list[int]) -> Structure:
    """``structure`` with the atoms at ``indices`` removed (vacancies), through pymatgen."""
    pmg = structure.to_pymatgen()
    pmg.remove_sites(sorted(set(int(i) for i in indices)))
    return Structure.from_pymatgen(pmg)
