"""RDKit descriptors of one molecule, and Morgan-fingerprint similarity.

Every value is RDKit's own function on the sanitised molecule:

| name | RDKit | unit |
| --- | --- | --- |
| ``molecular_weight`` | ``Descriptors.MolWt`` (average masses) | g/mol |
| ``logp`` | ``Crippen.MolLogP`` (Wildman-Crippen) | (log10 of a ratio) |
| ``tpsa`` | ``rdMolDescriptors.CalcTPSA`` (Ertl; N and O only) | A^2 |
| ``hbd`` / ``hba`` | ``Lipinski.NumHDonors`` / ``NumHAcceptors`` | count |
| ``rotatable_bonds`` | ``rdMolDescriptors.CalcNumRotatableBonds`` | count |
| ``rings`` | ``rdMolDescriptors.CalcNumRings`` (SSSR) | count |
| ``heavy_atoms`` | ``Mol.GetNumHeavyAtoms`` | count |
| ``qed`` | ``QED.qed`` (Bickerton 2012, default weights) | 0..1 |
| ``sa_score`` | contrib ``SA_Score.sascorer.calculateScore`` (Ertl & Schuffenhauer 2009) | 1 (easy) .. 10 |
"""

from __future__ import annotations

import os
import sys
from functools import cache

DESCRIPTOR_UNITS = {
    "molecular_weight": "g/mol",
    "logp": "",
    "tpsa": "A^2",
    "hbd": "",
    "hba": "",
    "rotatable_bonds": "",
    "rings": "",
    "heavy_atoms": "",
    "qed": "",
    "sa_score": "",
}
#: Morgan fingerprint of similarity: radius 2 (ECFP4-like), 2048 bits
MORGAN_RADIUS, MORGAN_BITS = 2, 2048


@cache
def sascorer():
    """RDKit's contributed synthetic-accessibility scorer (ships with the rdkit wheel under
    ``RDConfig.RDContribDir``; its fragment table loads on first use)."""
    from rdkit import RDConfig

    path = os.path.join(RDConfig.RDContribDir, "SA_Score")
    if path not in sys.path:  # sascorer imports its own helpers by plain name
        sys.path.append(path)
    from rdkit.Contrib.SA_Score import sascorer as module

    return module


def descriptors(mol) -> dict[str, float]:
    """The descriptors of :data:`DESCRIPTOR_UNITS` of a sanitised RDKit molecule."""
    from rdkit.Chem import QED, Crippen, Descriptors, Lipinski, rdMolDescriptors

    return {
        "molecular_weight": float(Descriptors.MolWt(mol)),
        "logp": float(Crippen.MolLogP(mol)),
        "tpsa": float(rdMolDescriptors.CalcTPSA(mol)),
        "hbd": float(Lipinski.NumHDonors(mol)),
        "hba": float(Lipinski.NumHAcceptors(mol)),
        "rotatable_bonds": float(rdMolDescriptors.CalcNumRotatableBonds(mol)),
        "rings": float(rdMolDescriptors.CalcNumRings(mol)),
        "heavy_atoms": float(mol.GetNumHeavyAtoms()),
        "qed": float(QED.qed(mol)),
        "sa_score": float(sascorer().calculateScore(mol)),
    }


def morgan_fingerprint(mol):
    """Morgan bit vector (radius :data:`MORGAN_RADIUS`, :data:`MORGAN_BITS` bits)."""
    return _morgan_generator().GetFingerprint(mol)


@cache
def _morgan_generator():
    from rdkit.Chem import rdFingerprintGenerator

    return rdFingerprintGenerator.GetMorganGenerator(radius=MORGAN_RADIUS, fpSize=MORGAN_BITS)


def tanimoto(mol_a, mol_b) -> float:
    """Tanimoto similarity of the Morgan fingerprints of two molecules (0..1)."""
    from rdkit import DataStructs

    return float(
        DataStructs.TanimotoSimilarity(morgan_fingerprint(mol_a), morgan_fingerprint(mol_b))
    )
