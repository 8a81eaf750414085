"""Conformer ensembles: ETKDG embedding and MMFF94 minimisation (RDKit).

:func:`conformer_ensemble` embeds ``n_conformers`` conformers of the molecule with
explicit hydrogens (ETKDGv3, a fixed random seed, one thread: the same molecule gives
the same ensemble bit for bit), minimises each with MMFF94, and summarises the
minimised energies:

- ``mmff_energy_min`` — the lowest MMFF94 energy [kcal/mol]; its conformer is the
  geometry handed to xTB;
- ``conformer_strain`` — the Boltzmann-weighted mean energy above that minimum at
  298.15 K [kcal/mol]: how much energy the thermally populated conformers hold above
  the best one;
- ``conformer_spread`` — the range (highest minus lowest) of the minimised energies
  [kcal/mol]: how rugged the landscape the embedding found is.

The lowest conformer leaves with its atoms and bonds (:meth:`Ensemble.structure`), which
the labs record in :mod:`labtwin.structures`' format. :func:`embed_conformer` makes one
MMFF94-minimised conformer the same way, for a lab that measures no ensemble but shows
its molecule (a synthesis product).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: R T at 298.15 K in kcal/mol (R = 1.987204e-3 kcal/(mol K))
RT_298_KCAL = 1.987204259e-3 * 298.15


@dataclass(frozen=True)
class ConformerSettings:
    """How an ensemble is made (part of the cache key of every 3D result)."""

    n_conformers: int = 8
    random_seed: int = 0xC0FFEE
    mmff_max_iters: int = 2000
    mmff_variant: str = "MMFF94"


@dataclass(frozen=True)
class Ensemble:
    """Minimised conformers: MMFF energies [kcal/mol] and the lowest one's geometry."""

    energies_kcal: np.ndarray  # (n,), in embedding order
    atomic_numbers: np.ndarray  # (n_atoms,), hydrogens included
    positions_angstrom: np.ndarray  # (n_atoms, 3) of the lowest-energy conformer
    converged: np.ndarray  # (n,) bool: MMFF minimisation converged within mmff_max_iters
    bonds: np.ndarray | None = None  # (m, 3) int: i, j, order (aromatic 4), hydrogens included

    def structure(self) -> dict[str, np.ndarray]:
        """The lowest conformer in :mod:`labtwin.structures`' format (numbers, positions,
        bonds)."""
        from labtwin.structures import structure_artifacts

        return structure_artifacts(self.atomic_numbers, self.positions_angstrom, None, self.bonds)

    def reflected(self) -> Ensemble:
        """The mirror image (x negated): the ensemble of the other enantiomer, with the
        same energies."""
        positions = self.positions_angstrom * np.array([-1.0, 1.0, 1.0])
        return Ensemble(
            self.energies_kcal, self.atomic_numbers, positions, self.converged, self.bonds
        )

    def summary(self) -> dict[str, float]:
        """``mmff_energy_min``, ``conformer_strain`` and ``conformer_spread`` (kcal/mol)."""
        e = self.energies_kcal
        above = e - e.min()
        weights = np.exp(-above / RT_298_KCAL)
        return {
            "mmff_energy_min": float(e.min()),
            "conformer_strain": float(np.sum(weights * above) / np.sum(weights)),
            "conformer_spread": float(above.max()),
        }


def bond_table(mol) -> np.ndarray:
    """(m, 3) bonds of an RDKit molecule: atom indices and order (1, 2, 3; aromatic 4;
    any other kind, dative say, 1)."""
    from rdkit import Chem

    orders = {
        Chem.BondType.SINGLE: 1,
        Chem.BondType.DOUBLE: 2,
        Chem.BondType.TRIPLE: 3,
        Chem.BondType.AROMATIC: 4,
    }
    rows = [
        (b.GetBeginAtomIdx(), b.GetEndAtomIdx(), orders.get(b.GetBondType(), 1))
        for b in mol.GetBonds()
    ]
    return np.array(rows, dtype=np.int64).reshape(-1, 3)


class ConformerError(Exception):
    """No conformer could be embedded or MMFF94 has no parameters for the molecule."""


def conformer_ensemble(mol, settings: ConformerSettings = ConformerSettings()) -> Ensemble:
    """Embed, minimise and rank conformers of a sanitised molecule (see the module docs).

    Raises :class:`ConformerError` when embedding gives no conformer or MMFF94 cannot
    type an atom; a molecule whose embedding never ends is the caller's timeout to handle.
    """
    from rdkit import Chem
    from rdkit.Chem import AllChem, rdDistGeom

    mh = Chem.AddHs(mol)
    params = rdDistGeom.ETKDGv3()
    params.randomSeed = settings.random_seed
    params.numThreads = 1
    conformer_ids = list(rdDistGeom.EmbedMultipleConfs(mh, settings.n_conformers, params))
    if not conformer_ids:
        params.useRandomCoords = True  # RDKit's advice for molecules that fail to embed
        conformer_ids = list(rdDistGeom.EmbedMultipleConfs(mh, settings.n_conformers, params))
    if not conformer_ids:
        raise ConformerError("ETKDG could not embed a conformer")
    if not AllChem.MMFFHasAllMoleculeParams(mh):
        raise ConformerError(f"{settings.mmff_variant} has no parameters for an atom type")
    results = AllChem.MMFFOptimizeMoleculeConfs(
        mh, numThreads=1, maxIters=settings.mmff_max_iters, mmffVariant=settings.mmff_variant
    )
    energies = np.array([energy for _, energy in results], dtype=np.float64)
    converged = np.array([flag == 0 for flag, _ in results])
    if not np.all(np.isfinite(energies)):
        raise ConformerError("MMFF94 gave a non-finite energy")
    best = int(np.argmin(energies))
    positions = mh.GetConformer(conformer_ids[best]).GetPositions()
    numbers = np.array([a.GetAtomicNum() for a in mh.GetAtoms()], dtype=np.int64)
    return Ensemble(
        energies, numbers, np.asarray(positions, dtype=np.float64), converged, bond_table(mh)
    )


def embed_conformer(
    mol, settings: ConformerSettings = ConformerSettings(), timeout_s: int = 2
) -> dict[str, np.ndarray] | None:
    """One ETKDG conformer of a sanitised molecule with hydrogens, MMFF94-minimised where
    MMFF94 has parameters, in :mod:`labtwin.structures`' format; None when ETKDG gives
    up within ``timeout_s``. Deterministic (the settings' seed, one thread)."""
    from rdkit import Chem
    from rdkit.Chem import AllChem, rdDistGeom

    from labtwin.structures import structure_artifacts

    mh = Chem.AddHs(mol)
    params = rdDistGeom.ETKDGv3()
    params.randomSeed = settings.random_seed
    params.numThreads = 1
    params.timeout = int(timeout_s)
    if rdDistGeom.EmbedMolecule(mh, params) < 0:
        return None
    if AllChem.MMFFHasAllMoleculeParams(mh):
        AllChem.MMFFOptimizeMolecule(
            mh, maxIters=settings.mmff_max_iters, mmffVariant=settings.mmff_variant
        )
    numbers = [a.GetAtomicNum() for a in mh.GetAtoms()]
    positions = mh.GetConformer().GetPositions()
    if not np.all(np.isfinite(positions)):
        return None
    return structure_artifacts(numbers, positions, None, bond_table(mh))
