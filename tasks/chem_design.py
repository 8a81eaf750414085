"""Molecule design against a property profile, measured by RDKit and GFN2-xTB.

An experiment is a molecule (a SMILES string) and a measurement kind:

- ``descriptors`` — RDKit descriptors (molecular weight, Crippen logP, TPSA, H-bond
  donors and acceptors, rotatable bonds, rings, heavy atoms, QED, SA score), the
  Tanimoto similarity to the campaign's reference molecule and structural alerts;
  nominal cost :data:`DESCRIPTOR_COST_S` CPU-s;
- ``xtb`` — those, plus an ETKDG/MMFF94 conformer ensemble (lowest energy, thermal
  strain, spread) and a GFN2-xTB single point on its lowest conformer (total energy,
  HOMO-LUMO gap, dipole moment); nominal cost ``XTB_COST_S + XTB_COST_PER_ATOM_S`` per
  atom (hydrogens included) CPU-s, fitted to single-core timings of drug-sized molecules
  (a deterministic estimate: measured wall time would make one experiment cost differently
  from run to run).

A campaign has 12 experiments and :data:`COST_BUDGET_S` CPU-s of cost, whichever runs out
first (``cost_budget=None`` lifts the second): about six xTB readings of a median hidden
molecule fit, twelve do not, so spending the budget is a decision. Before v2, experiments
were the only budget and an xTB reading, which measures everything a descriptors reading
does and more, cost a reward-maximiser nothing extra.

A campaign draws a property profile: ranges of logP, molecular weight and TPSA, a least
QED, and in some campaigns a window of the xTB gap and/or a least similarity to a
reference molecule from :data:`REFERENCES`. Every profile is built around a hidden
molecule that satisfies it, so each can be met: one of 10,283 substituted drug-like
scaffolds (:data:`SCAFFOLDS`, :func:`generated_witness`), in a similarity campaign one of
the 80 to 705 at least :data:`SIMILAR_MIN` similar to the reference; never a molecule of
:data:`LIBRARY`, from which the lab's random experiments draw. (MoleculeDesign-v0 built
every profile around one of the 18 drugs of :data:`WITNESSES`, and a similarity profile
around the one closest to the reference: the same 12 of them, measured blind, met 96 of
100 profiles, and one guess from the reference met every similarity profile.) The score
is the mean over the profile's criteria of a desirability that is 1 inside the range and
falls as ``exp(-(d / tol)^2 / 2)`` with the distance ``d`` outside it (:data:`TOLERANCES`); a gap
criterion scores 0 unless the gap was measured (an ``xtb`` experiment). A molecule with a
structural alert (heteroatom chains, peroxides, fused cyclopropanes, rings of five or
more nitrogens, hypervalent S, P or halogen atoms without a stabilising group, an SA
score above :data:`SA_SCORE_MAX`) scores 0, and its measurement's notes say why. Metals,
isotopes, atom maps, radicals, a net charge, charges on atoms other than N, O, P and S
(carbocations, carbanions not bonded to a cation), several fragments, more than 60 heavy
atoms and SMILES over 300 characters are ``invalid`` (the engine's screening,
:func:`labtwin.simulators.chem.molecule.problems`). MoleculeDesign-v1 measured a
carbocation/carbanion pair, an aryl pentazole and a tetraalkyl sulfurane as ordinary
molecules. A campaign succeeds when a molecule meets every criterion (score 1).

Descriptors and xTB values are deterministic calculations: they have no error bar, the
lab adds no noise and reports no uncertainty (there is nothing to calibrate). Conformer
and xTB observables of a ``descriptors`` experiment are not measured: they read 0 and
``xtb_measured`` is 0. They come from a search of 8 conformers embedded in the canonical
atom order of one stereoisomer of each mirror pair, with unassigned stereocentres
assigned first (:func:`labtwin.simulators.chem.molecule.stereo_form`), so the two
enantiomers and the unassigned spelling of a molecule read the same values; in v1 they
were three searches (propranolol's gap: 2.88 and 2.57 eV for its enantiomers, 2.51 eV
with the stereocentre unassigned), three draws of one molecule. Atom maps, which would
reorder the atoms of one molecule at will, are invalid.

``impossible=True`` asks for a molecular weight of 60-120 g/mol with a TPSA of
300-400 A^2. RDKit's TPSA (Ertl's table, N and O only) gives an N or O atom bonded to
a heavy atom at most 27.64 A^2 (the ``[NH3+]-`` entry; its fallback for unlisted
environments, ``30.5 - 8.2 n + 1.5 h`` for N and ``28.5 - 8.6 n + 1.5 h`` for O with
n >= 1 heavy neighbours and h hydrogens, gives at most 26.8), and every heavy atom of a
one-fragment molecule of two or more heavy atoms has a heavy neighbour. Carbon and the
other elements add mass but no TPSA, and an N or O atom weighs at least 14.007 g/mol,
so TPSA <= 27.64 / 14.007 x MW = 1.97 MW <= 237 A^2 at 120 g/mol: no molecule meets
both.
"""

from __future__ import annotations

import math
import os
from functools import cache, lru_cache
from typing import Any, Literal

import numpy as np
from pydantic import Field

from labtwin import Experiment, Measurement, ObservableSpec, Task, Value, register_task
from labtwin.frames import structure_panel
from labtwin.simulators.chem import MoleculeEngine, MoleculeResult, parse_smiles
from labtwin.simulators.chem.descriptors import tanimoto
from labtwin.simulators.chem.engine import UNITS
from labtwin.simulators.chem.molecule import structural_alerts
from labtwin.task import package_versions

MAX_SMILES_CHARS = 300
DESCRIPTOR_COST_S = 0.01
XTB_COST_S, XTB_COST_PER_ATOM_S = 0.01, 0.01
SA_SCORE_MAX = 6.0  # Ertl & Schuffenhauer: above 6 is hard to make
#: CPU-s a campaign may spend besides its 12 experiments: 12 descriptor readings cost 0.12,
#: an xTB reading of a median hidden molecule (31 atoms) 0.32, so about six xTB readings
#: fit, and which molecules deserve one is the campaign's decision
COST_BUDGET_S = 2.0
#: seconds one molecule may take in its worker (8 ETKDG conformers of a 58-carbon ring take ~5 s)
TIMEOUTS_S = {"descriptors": 10.0, "xtb": 30.0}
#: desirability widths outside a range: about the spread of each property between close analogues
TOLERANCES = {
    "logp": 0.5,
    "molecular_weight": 25.0,
    "tpsa": 10.0,
    "qed": 0.05,
    "xtb_gap": 0.25,
    "tanimoto_to_reference": 0.05,
}

#: reference molecules a campaign may ask to resemble (name, SMILES)
REFERENCES: tuple[tuple[str, str], ...] = (
    ("aspirin", "CC(=O)Oc1ccccc1C(=O)O"),
    ("paracetamol", "CC(=O)Nc1ccc(O)cc1"),
    ("ibuprofen", "CC(C)Cc1ccc(cc1)C(C)C(=O)O"),
    ("caffeine", "Cn1cnc2c1c(=O)n(C)c(=O)n2C"),
    ("sulfanilamide", "Nc1ccc(cc1)S(N)(=O)=O"),
)
#: common molecules: the random experiments of the lab (and of random search)
LIBRARY: tuple[str, ...] = (
    *(smiles for _, smiles in REFERENCES),
    "OC(=O)c1ccccc1O",  # salicylic acid
    "COC(=O)c1ccccc1O",  # methyl salicylate
    "CN1CCC[C@H]1c1cccnc1",  # nicotine
    "CC(C)NCC(O)COc1cccc2ccccc12",  # propranolol
    "CN(C)CCCN1c2ccccc2CCc2ccccc21",  # imipramine
    "OC(=O)Cc1ccccc1Nc1c(Cl)cccc1Cl",  # diclofenac
    "CCN(CC)CC(=O)Nc1c(C)cccc1C",  # lidocaine
    "CN1C(=O)CN=C(c2ccccc2)c2cc(Cl)ccc12",  # diazepam
    "NC(=O)c1cccnc1",  # nicotinamide
    "OC(=O)c1ccccc1",  # benzoic acid
    "OCC(O)CO",  # glycerol
    "CCCCCCCCCCCC(=O)O",  # lauric acid
    "c1ccc2ncccc2c1",  # quinoline
    "O=C1NC(=O)c2ccccc21",  # phthalimide
    "CC1=CC(=O)C=CC1=O",  # methyl-p-benzoquinone
)
#: drug-like molecules, none of them in LIBRARY: MoleculeLibrary adds them to its library.
#: (MoleculeDesign-v0 built every profile around one of them: a short public answer key.)
WITNESSES: tuple[str, ...] = (
    "CCOc1ccc(NC(C)=O)cc1",  # phenacetin
    "CC(=O)Nc1ccc(OC(C)=O)cc1",  # diacetamate
    "COc1ccc2cc(ccc2c1)C(C)C(=O)O",  # naproxen
    "CC(C(=O)O)c1cccc(c1)C(=O)c1ccccc1",  # ketoprofen
    "CC(C(=O)O)c1ccc(c(F)c1)-c1ccccc1",  # flurbiprofen
    "Cn1c(=O)c2[nH]cnc2n(C)c1=O",  # theophylline
    "Cn1cnc2c1c(=O)[nH]c(=O)n2C",  # theobromine
    "CC(=O)Nc1ccc(cc1)S(N)(=O)=O",  # N-acetylsulfanilamide
    "Cc1cc(NS(=O)(=O)c2ccc(N)cc2)no1",  # sulfamethoxazole
    "Cc1ccc(cc1)S(=O)(=O)NC(=O)NCCCC",  # tolbutamide
    "CC(C)(C)NCC(O)c1ccc(O)c(CO)c1",  # salbutamol
    "COCCc1ccc(OCC(O)CNC(C)C)cc1",  # metoprolol
    "NC(=O)N1c2ccccc2C=Cc2ccccc21",  # carbamazepine
    "OC(Cn1cncn1)(Cn1cncn1)c1ccc(F)cc1F",  # fluconazole
    "CCOC(=O)c1ccc(N)cc1",  # benzocaine
    "CCN(CC)CCOC(=O)c1ccc(N)cc1",  # procaine
    "COC(=O)c1ccc(O)cc1",  # methylparaben
    "CC(C)Cc1ccc(cc1)C(C)C(=O)OC",  # ibuprofen methyl ester
)
#: substituents of the generated hidden molecules: a group as SMILES, bonded through its
#: first atom ("" is hydrogen); ring labels start at %10, clear of a scaffold's 1 and 2
SUBSTITUENTS: tuple[str, ...] = (
    *("", "C", "CC", "C(C)C", "C(C)(C)C", "CC(C)C", "F", "Cl", "Br", "C(F)(F)F", "OC", "OCC"),
    *("O", "N", "N(C)C", "NC(C)=O", "C(=O)O", "C(=O)OC", "C(=O)OCC", "C(N)=O", "C(=O)NC"),
    *("C#N", "C(C)=O", "S(N)(=O)=O", "S(C)(=O)=O", "NS(C)(=O)=O", "CO", "CC(=O)O"),
    *("C(C)C(=O)O", "OC(C)=O", "N%10CCOCC%10", "N%10CCCC%10", "c%10ccccc%10", "OC(F)(F)F"),
    *("CN(C)C", "C(=O)c%10ccccc%10"),
)
#: N-substituents of the xanthine scaffold (caffeine's relatives carry alkyl and benzyl groups)
XANTHINE_SUBSTITUENTS = (
    *("C", "CC", "CCC", "CC(C)C", "CC=C", "CCO", "CC(C)=O", "Cc%10ccccc%10", "CC#N"),
)
#: scaffolds of the generated hidden molecules, each with two places ``{a}`` and ``{b}`` and
#: the substituents they take: disubstituted benzenes, pyridines, thiophenes and
#: naphthalenes (the frames of the reference drugs, with their groups among the
#: substituents), xanthines, and larger drug-like frames
SCAFFOLDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("c1cc{a}ccc1{b}", SUBSTITUENTS),  # para-disubstituted benzenes
    ("c1c{a}cccc1{b}", SUBSTITUENTS),  # meta
    ("c1cccc{a}c1{b}", SUBSTITUENTS),  # ortho
    ("n1cc{a}ccc1{b}", SUBSTITUENTS),  # 2,5-pyridines
    ("s1c{a}ccc1{b}", SUBSTITUENTS),  # 2,5-thiophenes
    ("c1c{a}cc2ccc{b}cc2c1", SUBSTITUENTS),  # 2,6-naphthalenes
    ("O=c1n{a}c(=O)c2c(ncn2{b})n1C", XANTHINE_SUBSTITUENTS),  # xanthines
    ("c1cc{a}ccc1C(=O)Nc2ccc{b}cc2", SUBSTITUENTS),  # benzanilides
    ("c1cc{a}ccc1S(=O)(=O)Nc2ccc{b}cc2", SUBSTITUENTS),  # sulfonanilides
    ("c1cc{a}ccc1-c2ccc{b}cc2", SUBSTITUENTS),  # biphenyls
    ("c1cc{a}ccc1CNC(=O)c2ccc{b}cn2", SUBSTITUENTS),  # picolinamides
    ("c1cc{a}cc{b}c1OCC(O)CNC(C)C", SUBSTITUENTS),  # aryloxypropanolamines (beta blockers)
    ("c1cc{a}ccc1C(=O)N2CCN(CC2){b}", SUBSTITUENTS[:6]),  # piperazine amides
)
#: least heavy atoms of a hidden molecule (fewer are solvents: toluene, anisole)
WITNESS_MIN_HEAVY_ATOMS = 9
#: least Tanimoto similarity of a similarity campaign's hidden molecule to the reference: an
#: analogue (the reference's frame with other substituents scores 0.35-0.7), so the least
#: similarity the profile asks, 70-95 % of the hidden molecule's, is 0.24 or more
SIMILAR_MIN = 0.35
#: molecules drawn, at most, to find a campaign's hidden molecule (a similarity campaign
#: accepts 0.56 % of the draws for caffeine, whose analogues are 80 xanthines, to 7 % for
#: ibuprofen, so 10,000 draws all fail with a probability below 1e-24)
MAX_WITNESS_DRAWS = 10_000
#: (name, lowest, highest) of a campaign's ranges, as public conditions
PROFILE_SPECS = (
    ObservableSpec("logp_min", "", "least Crippen logP", 5.0),
    ObservableSpec("logp_max", "", "greatest Crippen logP", 5.0),
    ObservableSpec("mw_min", "g/mol", "least molecular weight", 500.0),
    ObservableSpec("mw_max", "g/mol", "greatest molecular weight", 500.0),
    ObservableSpec("tpsa_min", "A^2", "least TPSA", 100.0),
    ObservableSpec("tpsa_max", "A^2", "greatest TPSA", 100.0),
    ObservableSpec("qed_min", "", "least QED", 1.0),
    ObservableSpec("gap_required", "", "1 if the profile has an xTB gap window", 1.0),
    ObservableSpec("gap_min_eV", "eV", "least GFN2-xTB HOMO-LUMO gap", 5.0),
    ObservableSpec("gap_max_eV", "eV", "greatest GFN2-xTB HOMO-LUMO gap", 5.0),
    ObservableSpec("similarity_min", "", "least Tanimoto similarity to the reference", 1.0),
    ObservableSpec("reference_index", "", "index of the reference molecule", 4.0),
)
NOMINAL_PROFILE = {  # around paracetamol's neighbours: a light, polar aromatic amide
    "logp_min": 0.0,
    "logp_max": 2.0,
    "mw_min": 130.0,
    "mw_max": 230.0,
    "tpsa_min": 40.0,
    "tpsa_max": 80.0,
    "qed_min": 0.5,
    "gap_required": 0.0,
    "gap_min_eV": 0.0,
    "gap_max_eV": 0.0,
    "similarity_min": 0.0,
    "reference_index": 1.0,
}
IMPOSSIBLE_PROFILE = {"mw_min": 60.0, "mw_max": 120.0, "tpsa_min": 300.0, "tpsa_max": 400.0}


class MoleculeExperiment(Experiment):
    """One molecule and what to measure of it."""

    smiles: str = Field(
        min_length=1,
        max_length=MAX_SMILES_CHARS,
        description="the molecule as a SMILES string (one neutral, closed-shell molecule)",
    )
    kind: Literal["descriptors", "xtb"] = Field(
        "descriptors",
        description=(
            "descriptors: RDKit descriptors only (cheap); xtb: also conformers, MMFF94 "
            "energies and a GFN2-xTB single point (gap, dipole, energy; costlier)"
        ),
    )


def _spec(name: str, description: str, scale: float = 1.0) -> ObservableSpec:
    return ObservableSpec(name, UNITS.get(name, ""), description, scale)


OBSERVABLES = (
    _spec("molecular_weight", "molecular weight (RDKit MolWt)", 500.0),
    _spec("logp", "Wildman-Crippen logP", 5.0),
    _spec("tpsa", "topological polar surface area (Ertl)", 100.0),
    _spec("hbd", "H-bond donors (Lipinski)", 5.0),
    _spec("hba", "H-bond acceptors (Lipinski)", 10.0),
    _spec("rotatable_bonds", "rotatable bonds", 10.0),
    _spec("rings", "rings (SSSR)", 5.0),
    _spec("heavy_atoms", "heavy atoms", 50.0),
    _spec("qed", "quantitative estimate of drug-likeness"),
    _spec("sa_score", "synthetic accessibility score, 1 (easy) to 10 (hard)", 10.0),
    _spec("tanimoto_to_reference", "Morgan (r=2, 2048 bits) Tanimoto to the reference"),
    _spec("structural_alerts", "structural alerts (the molecule scores 0 if any)"),
    _spec("xtb_measured", "1 if conformers and xTB were measured (an xtb experiment)"),
    _spec("mmff_energy_min", "lowest MMFF94 conformer energy", 100.0),
    _spec("conformer_strain", "Boltzmann mean MMFF94 energy above the lowest, 298 K", 5.0),
    _spec("conformer_spread", "range of MMFF94 conformer energies", 10.0),
    _spec("xtb_energy", "GFN2-xTB total energy of the lowest conformer", 50.0),
    _spec("xtb_gap", "GFN2-xTB HOMO-LUMO gap", 5.0),
    _spec("xtb_dipole", "GFN2-xTB dipole moment", 5.0),
)
THREE_D = (
    "mmff_energy_min",
    "conformer_strain",
    "conformer_spread",
    "xtb_energy",
    "xtb_gap",
    "xtb_dipole",
)

_ENGINE: MoleculeEngine | None = None


def engine() -> MoleculeEngine:
    """The molecule engine the lab measures with (one per process, made on first use;
    one worker per two cores, up to four)."""
    global _ENGINE
    if _ENGINE is None:
        workers = max(1, min(4, (os.cpu_count() or 2) // 2))
        _ENGINE = MoleculeEngine(n_workers=workers, timeouts_s=TIMEOUTS_S)
    return _ENGINE


@lru_cache(maxsize=4096)
def _mol(smiles: str):
    parsed = parse_smiles(smiles)
    assert parsed.ok, parsed.reason  # shipped molecules parse
    return parsed.mol


@lru_cache(maxsize=4096)
def witness_values(smiles: str, kind: str) -> dict[str, float]:
    """Measured values of a hidden molecule (builds profiles around it)."""
    return witnesses_values([smiles], kind)[0]


def witnesses_values(smiles: list[str], kind: str) -> list[dict[str, float]]:
    """:func:`witness_values` of several hidden molecules, in one engine call."""
    values = []
    for s, result in zip(smiles, engine().measure(smiles, kind)):
        if not result.ok:
            raise RuntimeError(f"hidden molecule {s} did not measure: {result.reason}")
        values.append(dict(result.values))
    return values


def scaffold_molecule(template: str, a: str, b: str) -> str:
    """The SMILES of a scaffold of :data:`SCAFFOLDS` with substituents ``a`` and ``b``."""
    return template.format(a=f"({a})" if a else "", b=f"({b})" if b else "")


@cache
def generated_molecules() -> tuple[str, ...]:
    """Every molecule the hidden-molecule generator writes: each scaffold of
    :data:`SCAFFOLDS` with every pair of its substituents (SMILES as written; a symmetric
    scaffold writes some molecules twice)."""
    return tuple(
        scaffold_molecule(template, a, b)
        for template, substituents in SCAFFOLDS
        for a in substituents
        for b in substituents
    )


@cache
def _library_canonical() -> frozenset[str]:
    return frozenset(parse_smiles(smiles).canonical for smiles in LIBRARY)


def generated_witness(rng: np.random.Generator, reference_smiles: str | None = None) -> str:
    """A hidden molecule to build a profile around, as canonical SMILES: one of
    :func:`generated_molecules` drawn uniformly (so no scaffold's few molecules are drawn
    often), drawn again while it is in :data:`LIBRARY` (the references are), has fewer than
    :data:`WITNESS_MIN_HEAVY_ATOMS` heavy atoms or a structural alert, or, given
    ``reference_smiles``, is less than :data:`SIMILAR_MIN` similar to the reference."""
    reference = _mol(reference_smiles) if reference_smiles is not None else None
    molecules = generated_molecules()
    for _ in range(MAX_WITNESS_DRAWS):
        parsed = parse_smiles(molecules[int(rng.integers(len(molecules)))])
        mol = parsed.mol
        if (
            parsed.canonical in _library_canonical()
            or mol.GetNumHeavyAtoms() < WITNESS_MIN_HEAVY_ATOMS
            or (reference is not None and tanimoto(mol, reference) < SIMILAR_MIN)
            or structural_alerts(mol)
        ):
            continue
        return parsed.canonical
    raise RuntimeError(f"no hidden molecule found in {MAX_WITNESS_DRAWS} draws")


def desirability(value: float, low: float, high: float, tolerance: float) -> float:
    """1 inside ``[low, high]``, ``exp(-(d / tolerance)^2 / 2)`` at a distance d outside.

    >>> desirability(1.0, 0.0, 2.0, 0.5), round(desirability(2.5, 0.0, 2.0, 0.5), 4)
    (1.0, 0.6065)
    """
    distance = max(low - value, 0.0, value - high)
    return math.exp(-0.5 * (distance / tolerance) ** 2)


def criteria(conditions: dict[str, Any]) -> list[tuple[str, float, float]]:
    """The profile as ``(observable, low, high)`` triples."""
    out = [
        ("logp", conditions["logp_min"], conditions["logp_max"]),
        ("molecular_weight", conditions["mw_min"], conditions["mw_max"]),
        ("tpsa", conditions["tpsa_min"], conditions["tpsa_max"]),
        ("qed", conditions["qed_min"], 1.0),
    ]
    if conditions["gap_required"]:
        out.append(("xtb_gap", conditions["gap_min_eV"], conditions["gap_max_eV"]))
    if conditions["similarity_min"] > 0:
        out.append(("tanimoto_to_reference", conditions["similarity_min"], 1.0))
    return out


def profile_satisfaction(measurement: Measurement, conditions: dict[str, Any]) -> float:
    """Mean desirability of the measured values over the profile's criteria (a gap that
    was not measured counts 0); 0 for a molecule with structural alerts."""
    if measurement["structural_alerts"] > 0:
        return 0.0
    scores = []
    for name, low, high in criteria(conditions):
        if name in THREE_D and not measurement["xtb_measured"]:
            scores.append(0.0)
        else:
            scores.append(desirability(measurement[name], low, high, TOLERANCES[name]))
    return float(sum(scores) / len(scores))


def _around(rng: np.random.Generator, value: float, width: float, digits: int) -> tuple:
    """A range of ``width`` that holds ``value`` away from its edges, rounded outwards."""
    low = value - rng.uniform(0.15, 0.85) * width
    scale = 10.0**digits
    return math.floor(low * scale) / scale, math.ceil((low + width) * scale) / scale


@register_task
class MoleculeDesign(Task):
    """Propose molecules that meet a drug-like property profile; RDKit and GFN2-xTB measure.

    Success: one molecule meets every criterion of the profile (score 1). Random search
    (the lab's random experiments, 12 per campaign) succeeds in 1 of 32 campaigns, mean
    best score 0.69; 12 fixed molecules chosen against the profile generator, proposed
    blind, meet 34 of 100 profiles. ``impossible=True``: the profile asks for
    MW <= 120 g/mol with TPSA >= 300 A^2, which no molecule has (module docs); random
    search's best scores average 0.47 there.
    """

    id = "MoleculeDesign-v2"
    experiment_model = MoleculeExperiment
    observables = OBSERVABLES
    public_conditions = PROFILE_SPECS
    cost_unit = "CPU-s"
    default_budget = 12
    score_range = (0.0, 1.0)
    success_threshold = 1.0
    reward_description = (
        "mean over the profile's criteria of a desirability (1 inside the range, Gaussian "
        "fall-off outside); 0 for molecules with structural alerts"
    )
    brief = f"""
You design small drug-like molecules. Each experiment is one molecule, given as a SMILES
string, and a measurement kind: "descriptors" (cheap, {DESCRIPTOR_COST_S:g} CPU-s: RDKit's
molecular weight, Crippen logP, TPSA, H-bond donors/acceptors, rotatable bonds, rings,
heavy atoms, QED, synthetic accessibility, and the Tanimoto similarity to this campaign's
reference molecule) or "xtb" (about {XTB_COST_S:g} + {XTB_COST_PER_ATOM_S:g} CPU-s per atom
with hydrogens: all of that plus an MMFF94 conformer ensemble and a GFN2-xTB calculation
of the HOMO-LUMO gap, dipole moment and energy). The campaign's profile gives ranges of
logP, molecular weight and TPSA, a least QED, and sometimes a window of the xTB gap (only
an "xtb" experiment measures it) or a least similarity to the reference. The score is the
mean over the criteria of 1 inside each range, falling smoothly outside. Molecules must be
one neutral, closed-shell organic molecule (H, B, C, N, O, F, Si, P, S, Cl, Br, I; no
metals, isotopes, atom maps, radicals, net charge or '.'-separated fragments; charged
atoms only as in nitro groups, N-oxides or zwitterions, on N, O, P or S; at most 60 heavy
atoms); chains of three or more singly bonded N/O/S atoms, peroxides, rings of five or
more nitrogens, hypervalent S or P without a double bond to O or N, and molecules with a
synthetic accessibility score above {SA_SCORE_MAX:g} score 0. Meet every criterion with
one molecule within the budget: a number of experiments and {COST_BUDGET_S:g} CPU-s of cost,
whichever runs out first (a descriptors reading costs {DESCRIPTOR_COST_S:g} CPU-s, an xtb
reading of a drug-sized molecule 0.2-0.5), so choose which molecules deserve an xtb reading.
"""

    default_cost_budget = COST_BUDGET_S

    def __init__(
        self,
        budget: int | None = None,
        impossible: bool = False,
        cost_budget: float | None = COST_BUDGET_S,
    ) -> None:
        super().__init__(budget)
        self.impossible = bool(impossible)
        if cost_budget is not None and not (math.isfinite(cost_budget) and cost_budget > 0):
            raise ValueError(f"cost_budget must be positive and finite, got {cost_budget}")
        self.cost_budget = None if cost_budget is None else float(cost_budget)

    # ---- campaigns -------------------------------------------------------------------

    def nominal_conditions(self) -> dict[str, Any]:
        profile = dict(NOMINAL_PROFILE)
        if self.impossible:
            profile |= IMPOSSIBLE_PROFILE
        return self._with_reference(profile)

    def draw_witness(self, rng: np.random.Generator, reference: int, similar: bool) -> str:
        """The hidden molecule a campaign's profile is built around: a generated one
        (:func:`generated_witness`), with ``similar`` an analogue of reference ``reference``."""
        return generated_witness(rng, REFERENCES[reference][1] if similar else None)

    def sample_conditions(self, rng: np.random.Generator) -> dict[str, Any]:
        """A profile around a hidden molecule (:meth:`draw_witness`), so every profile
        can be met."""
        return self.sample_conditions_batch([rng])[0]

    def sample_conditions_batch(self, rngs: list[np.random.Generator]) -> list[dict[str, Any]]:
        """:meth:`sample_conditions` of each generator, the hidden molecules measured
        together: one engine call per kind, so the workers share a batch's xTB runs (a
        third of the profiles have a gap window) instead of running them one by one. Each
        generator draws what it would draw alone, so the profiles are the same."""
        starts = [self._draw_witness_of(rng) for rng in rngs]
        values: dict[tuple[str, str], dict[str, float]] = {}
        for kind in ("descriptors", "xtb"):
            witnesses = list(dict.fromkeys(w for _, _, gap, w in starts if (kind == "xtb") == gap))
            if witnesses:
                values |= {
                    (w, kind): v for w, v in zip(witnesses, witnesses_values(witnesses, kind))
                }
        return [
            self._profile(rng, start, values[start[3], "xtb" if start[2] else "descriptors"])
            for rng, start in zip(rngs, starts)
        ]

    def _draw_witness_of(self, rng: np.random.Generator) -> tuple[int, bool, bool, str]:
        """The first draws of a profile: the reference, whether similarity and a gap window
        are asked for, and the hidden molecule."""
        reference = int(rng.integers(len(REFERENCES)))
        use_similarity = bool(rng.random() < 0.4)
        use_gap = bool(rng.random() < 0.3)
        return reference, use_similarity, use_gap, self.draw_witness(rng, reference, use_similarity)

    def _profile(
        self,
        rng: np.random.Generator,
        start: tuple[int, bool, bool, str],
        values: dict[str, float],
    ) -> dict[str, Any]:
        """The rest of a profile, around the hidden molecule's measured ``values``."""
        reference, use_similarity, use_gap, witness = start
        reference_mol = _mol(REFERENCES[reference][1])
        profile: dict[str, Any] = {"reference_index": float(reference)}
        profile["logp_min"], profile["logp_max"] = _around(
            rng, values["logp"], rng.uniform(0.8, 1.6), 1
        )
        profile["mw_min"], profile["mw_max"] = _around(
            rng, values["molecular_weight"], rng.uniform(40.0, 100.0), -1
        )
        profile["tpsa_min"], profile["tpsa_max"] = _around(
            rng, values["tpsa"], rng.uniform(15.0, 35.0), 0
        )
        profile["tpsa_min"] = max(profile["tpsa_min"], 0.0)
        profile["qed_min"] = (
            math.floor(max(0.0, values["qed"] - rng.uniform(0.02, 0.1)) * 100) / 100
        )
        profile["gap_required"] = float(use_gap)
        profile["gap_min_eV"], profile["gap_max_eV"] = (
            _around(rng, values["xtb_gap"], rng.uniform(0.4, 1.0), 2) if use_gap else (0.0, 0.0)
        )
        similarity = tanimoto(_mol(witness), reference_mol)
        profile["similarity_min"] = (
            math.floor(similarity * rng.uniform(0.7, 0.95) * 100) / 100 if use_similarity else 0.0
        )
        profile["witness"] = witness  # hidden: the molecule the profile was built around
        if self.impossible:
            profile |= IMPOSSIBLE_PROFILE
        return self._with_reference(profile)

    @staticmethod
    def _with_reference(profile: dict[str, Any]) -> dict[str, Any]:
        name, smiles = REFERENCES[int(profile["reference_index"])]
        return {**profile, "reference": name, "reference_smiles": smiles}

    def describe_conditions(self, conditions: dict[str, Any]) -> str:
        c = conditions
        parts = [
            f"Profile: logP {c['logp_min']:g} to {c['logp_max']:g}",
            f"molecular weight {c['mw_min']:g} to {c['mw_max']:g} g/mol",
            f"TPSA {c['tpsa_min']:g} to {c['tpsa_max']:g} A^2",
            f"QED at least {c['qed_min']:g}",
        ]
        if c["gap_required"]:
            parts.append(f"GFN2-xTB HOMO-LUMO gap {c['gap_min_eV']:g} to {c['gap_max_eV']:g} eV")
        if c["similarity_min"] > 0:
            parts.append(f"Tanimoto similarity to the reference at least {c['similarity_min']:g}")
        reference = f"Reference molecule: {c['reference']} ({c['reference_smiles']})."
        return "; ".join(parts) + ". " + reference

    def random_experiment(self, rng: np.random.Generator) -> MoleculeExperiment:
        """A library molecule, measured by descriptors (70 %) or xTB (30 %)."""
        smiles = LIBRARY[int(rng.integers(len(LIBRARY)))]
        return MoleculeExperiment(
            smiles=smiles, kind="xtb" if rng.random() < 0.3 else "descriptors"
        )

    # ---- measuring -------------------------------------------------------------------

    def simulate(self, experiments, conditions, rngs):  # noqa: D102 (documented on Task)
        out: list[Measurement | None] = [None] * len(experiments)
        for kind in ("descriptors", "xtb"):
            index = [i for i, e in enumerate(experiments) if e.kind == kind]
            if not index:
                continue
            results = engine().measure([experiments[i].smiles for i in index], kind)
            for i, result in zip(index, results):
                out[i] = self._measurement(result, conditions[i])
        return out

    def _measurement(self, result: MoleculeResult, conditions: dict[str, Any]) -> Measurement:
        provenance = {
            "simulator": "labtwin.simulators.chem (RDKit; GFN2-xTB via tblite)",
            "device": "cpu",
            "canonical_smiles": result.canonical,
            "versions": package_versions("rdkit", "tblite"),
        }
        if result.status == "invalid":
            return Measurement.invalid(result.reason, result.smiles, **provenance)
        if not result.ok:
            return Measurement.failed(result.reason, provenance=provenance)
        values = dict(result.values)
        alerts = list(result.alerts)
        if values["sa_score"] > SA_SCORE_MAX:
            alerts.append(f"SA score {values['sa_score']:.2f} above {SA_SCORE_MAX:g}")
        values["tanimoto_to_reference"] = tanimoto(
            _mol(result.canonical), _mol(conditions["reference_smiles"])
        )
        values["structural_alerts"] = float(len(alerts))
        values["xtb_measured"] = float(result.kind == "xtb")
        notes = [f"structural alert: {a} (scores 0)" for a in alerts] + list(result.notes)
        if result.kind == "descriptors":
            values |= dict.fromkeys(THREE_D, 0.0)
            notes.append("conformer and xTB values not measured (a descriptors experiment)")
        observables = {spec.name: Value(values[spec.name], spec.unit) for spec in OBSERVABLES}
        cost = DESCRIPTOR_COST_S
        if result.kind == "xtb":
            cost = XTB_COST_S + XTB_COST_PER_ATOM_S * result.n_atoms
        # the conformer xTB measured (an xtb experiment), in labtwin.structures' format
        artifacts = dict(result.structure)  # a dict of its own; the arrays are the
        # engine's stored, read-only ones (shared by every measurement of this molecule)
        return Measurement(
            "ok", observables, cost=cost, provenance=provenance, notes=notes, artifacts=artifacts
        )

    def frame_panel(self, records, conditions):  # noqa: D102 (documented on Task)
        return structure_panel(records, "no conformer yet (xtb experiments embed one)")

    def reward(self, measurement: Measurement, conditions: dict[str, Any]) -> float:
        return profile_satisfaction(measurement, conditions)
