"""Reading a SMILES string: parse, sanitise, canonicalise, and screen the structure.

:func:`parse_smiles` gives a sanitised RDKit molecule and its canonical SMILES, or the
reason RDKit gave for rejecting the input (its own error-log messages, tidied).
:func:`screen` lists what makes a parsed molecule unfit for a drug-like design lab:
hard problems (metals, isotopes, atom maps, radicals, a net charge, charges on atoms
that do not carry one in a stable molecule, several fragments, too many atoms), which a
lab treats as invalid input, and structural alerts (chains of three or more
heteroatoms, peroxides, all-nitrogen rings, hypervalent atoms without the groups that
make them stable), known ways of gaming property rewards with molecules that could not
be made or would not survive.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import NamedTuple

#: elements of organic, drug-like chemistry (anything else, metals included, is refused)
ORGANIC_ELEMENTS = frozenset({"H", "B", "C", "N", "O", "F", "Si", "P", "S", "Cl", "Br", "I"})
HETEROATOMS = frozenset({7, 8, 16})  # N, O, S: the atoms of heteroatom chains
#: elements that carry a formal charge in stable neutral molecules: ammonium, nitro and
#: N-oxide nitrogen, phosphonium, sulfonium (+); olate, thiolate, azide and diazo N (-)
CHARGEABLE = frozenset({"N", "O", "P", "S"})
#: the usual valence of each element with a hypervalent form (S 4 and 6, P 5, I 3 and 5,
#: Cl and Br 3), counted as RDKit's total valence less the formal charge (a sulfonium S+
#: with three bonds or a phosphonium P+ with four is at its usual valence)
USUAL_VALENCE = {"P": 3, "S": 2, "Cl": 1, "Br": 1, "I": 1}
#: atoms that, double-bonded to a hypervalent S or P, make it a stable group: sulfoxides,
#: sulfones, sulfonamides, sulfoximines, phosphates, phosphine oxides and sulfides, Wittig
#: ylides
STABILISING = {"S": frozenset({"O", "N"}), "P": frozenset({"O", "S", "N", "C"})}
_TIMESTAMP = re.compile(r"^\[\d\d:\d\d:\d\d\]\s*")


@dataclass(frozen=True)
class Limits:
    """What :func:`screen` accepts."""

    #: characters of SMILES read at all (longer input is refused before RDKit sees it)
    max_smiles_chars: int = 300
    #: heavy (non-hydrogen) atoms of one molecule
    max_heavy_atoms: int = 60
    #: atoms carrying a formal charge (a nitro group or an N-oxide needs two)
    max_charged_atoms: int = 2


@dataclass(frozen=True)
class Parsed:
    """A sanitised molecule (``mol``) and its canonical SMILES, or ``reason`` why not."""

    canonical: str = ""
    mol: object | None = None  # rdkit.Chem.Mol
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.mol is not None


def tidy_rdkit_log(text: str, limit: int = 300) -> str:
    """RDKit's error-log lines as one short sentence: timestamps, the echoed input and the
    ``~^`` position markers dropped, repeats removed."""
    lines: list[str] = []
    for raw in text.splitlines():
        line = _TIMESTAMP.sub("", raw).strip()
        line = line.removeprefix("SMILES Parse Error:").strip()
        line = re.sub(r" for input: '.*'$", "", line)  # the input is shown by the caller
        if not line or set(line) <= {"~", "^"} or line in lines:
            continue
        if line.startswith("Failed parsing SMILES") and lines:
            continue  # the summary line repeats what the lines before it said
        if (
            lines
            and lines[-1].startswith("check for mistakes")
            and not line.startswith(("syntax", "extra", "unclosed", "Explicit", "Can't", "Failed"))
        ):
            continue  # the echoed input after "check for mistakes around position n:"
        lines.append(line.rstrip(":"))
    reason = "; ".join(lines)
    return reason if len(reason) <= limit else reason[: limit - 3] + "..."


def parse_smiles(smiles: str, limits: Limits = Limits()) -> Parsed:
    """Parse and sanitise ``smiles``; the canonical SMILES (isomeric) on success.

    Never raises for bad input: an empty, overlong or unparsable string, or one RDKit
    cannot sanitise (a valence of five on carbon, a ring it cannot kekulise), gives a
    :class:`Parsed` with RDKit's own message as ``reason``.
    """
    from rdkit import Chem, rdBase

    if not isinstance(smiles, str):
        return Parsed(reason=f"a SMILES must be a string, got {type(smiles).__name__}")
    text = smiles.strip()
    if not text:
        return Parsed(reason="empty SMILES")
    if len(text) > limits.max_smiles_chars:
        return Parsed(
            reason=f"SMILES of {len(text)} characters; at most {limits.max_smiles_chars} are read"
        )
    if any(c.isspace() for c in text):
        return Parsed(reason="a SMILES has no spaces (one molecule, written without blanks)")
    with rdBase.CaptureErrorLog() as log:
        try:
            mol = Chem.MolFromSmiles(text)
        except Exception as err:  # noqa: BLE001 - RDKit raises for some inputs, returns None for most
            mol, message = None, f"{type(err).__name__}: {err}"
        else:
            message = ""
    if mol is None:
        why = tidy_rdkit_log(log.messages) or message or "RDKit could not read it"
        return Parsed(reason=f"invalid SMILES {_shown(text)}: {why}")
    if mol.GetNumAtoms() == 0:
        return Parsed(reason=f"SMILES {_shown(text)} has no atoms")
    return Parsed(canonical=Chem.MolToSmiles(mol), mol=mol)


def atoms_of(mol) -> list:
    """The molecule's atoms in index order, one C++ call each (``mol.GetAtoms()`` goes
    through RDKit's Python sequence wrapper: four times the cost per atom, which was most
    of the screening's checks)."""
    return [mol.GetAtomWithIdx(i) for i in range(mol.GetNumAtoms())]


def bonds_of(mol) -> list:
    """The molecule's bonds in index order (see :func:`atoms_of`)."""
    return [mol.GetBondWithIdx(i) for i in range(mol.GetNumBonds())]


def _shown(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


def problems(mol, limits: Limits = Limits()) -> list[str]:
    """Why a parsed molecule is not a molecule this lab measures (empty: it is).

    Several fragments (a ``.`` in the SMILES: salts, mixtures, molecules glued to score
    twice), elements outside :data:`ORGANIC_ELEMENTS` (metals), isotope labels, atom maps,
    radicals, a net charge, more than ``max_charged_atoms`` charged atoms, a charge on an
    element outside :data:`CHARGEABLE` except a carbanion bonded to a cation (isonitriles,
    ylides): a carbocation and a carbanion in one molecule are neutral overall but no
    molecule anyone could keep in a flask, and more than ``max_heavy_atoms`` heavy atoms.

    Atom maps (``[CH3:1]``) label atoms, not molecules, but RDKit keeps them in the
    canonical SMILES and orders the atoms by them, so each labelling of one molecule would
    be measured as another molecule (another cache entry, another conformer embedding).
    """
    from rdkit import Chem

    found = []
    n_fragments = len(Chem.GetMolFrags(mol))
    if n_fragments > 1:
        found.append(f"{n_fragments} disconnected fragments (one molecule per experiment)")
    atoms = atoms_of(mol)
    foreign = sorted({a.GetSymbol() for a in atoms} - ORGANIC_ELEMENTS)
    if foreign:
        found.append(f"element(s) {', '.join(foreign)} not allowed (organic elements only)")
    if any(a.GetIsotope() for a in atoms):
        found.append("isotope labels are not allowed")
    if any(a.GetAtomMapNum() for a in atoms):
        found.append(
            "atom maps (':n' in a bracket atom, as in [CH3:1]) are not allowed: "
            "write the molecule without them"
        )
    radicals = sum(a.GetNumRadicalElectrons() for a in atoms)
    if radicals:
        found.append(f"{radicals} radical electron(s): only closed-shell molecules are measured")
    charge = Chem.GetFormalCharge(mol)
    if charge:
        found.append(f"net charge {charge:+d}: only neutral molecules are measured")
    charged = sum(1 for a in atoms if a.GetFormalCharge())
    if charged > limits.max_charged_atoms:
        found.append(f"{charged} charged atoms (at most {limits.max_charged_atoms})")
    unstable = sorted({_unstable_charge(a) for a in atoms if a.GetFormalCharge()} - {""})
    if unstable:
        found.append(
            f"{', '.join(unstable)}: charges are measured only on N, O, P and S "
            "(nitro groups, N-oxides, zwitterions) and on a carbanion bonded to a cation"
        )
    heavy = mol.GetNumHeavyAtoms()
    if heavy > limits.max_heavy_atoms:
        found.append(f"{heavy} heavy atoms (at most {limits.max_heavy_atoms})")
    return found


def _unstable_charge(atom) -> str:
    """What is wrong with a charged atom, or "" when the charge is one that stable neutral
    molecules carry (see :data:`CHARGEABLE`)."""
    symbol, charge = atom.GetSymbol(), atom.GetFormalCharge()
    if symbol in CHARGEABLE:
        return ""
    if symbol == "C" and charge < 0:
        if any(n.GetFormalCharge() > 0 for n in atom.GetNeighbors()):
            return ""  # isonitrile [C-]#[N+], ylides
        return "a carbanion"
    if symbol == "C":
        return "a carbocation"
    return f"a charged {symbol} atom"


def structural_alerts(mol) -> list[str]:
    """Structures a property reward can be gamed with but no chemist would make.

    - a chain of three or more N, O or S atoms joined by single bonds (``OOO``,
      ``NNNN``, ``SSS``: explosive or absurd); aromatic bonds (tetrazole), charged
      nitrogen (azides, nitro groups) and sulfonyl/sulfinyl sulfur (sulfonamides,
      sulfonic acids: S bonded to an =O) do not continue a chain;
    - an O-O single bond (a peroxide);
    - an atom in two or more rings of three (bridged cyclopropanes, prismanes);
    - a ring of five or more nitrogen atoms (pentazoles, pentazines: they lose N2 below
      room temperature; tetrazoles and tetrazines are fine);
    - a hypervalent sulfur or phosphorus without a double bond to O or N (P: also S or
      C), such as a tetraalkyl sulfurane or a pentaalkyl phosphorane, unless it carries
      four or more fluorines (SF5 groups); a hypervalent halogen (iodine(III) reagents are
      oxidants, not drugs). See :data:`USUAL_VALENCE` and :data:`STABILISING`.
    """
    alerts = []
    longest = _longest_heteroatom_chain(mol)
    if longest >= 3:
        alerts.append(f"a chain of {longest} heteroatoms")
    if mol.HasSubstructMatch(_peroxide()):
        alerts.append("a peroxide (O-O bond)")
    ring_info = mol.GetRingInfo()
    small = [set(r) for r in ring_info.AtomRings() if len(r) == 3]
    if any(sum(i in r for r in small) >= 2 for i in range(mol.GetNumAtoms())):
        alerts.append("an atom shared by two three-membered rings")
    atoms = atoms_of(mol)
    if any(sum(atoms[i].GetAtomicNum() == 7 for i in r) >= 5 for r in ring_info.AtomRings()):
        alerts.append("a ring of five or more nitrogen atoms")
    hypervalent = sorted({a.GetSymbol() for a in atoms if _unstable_hypervalence(a)})
    if hypervalent:
        alerts.append(f"a hypervalent {', '.join(hypervalent)} atom without a stabilising group")
    return alerts


def _unstable_hypervalence(atom) -> bool:
    """Whether ``atom`` is beyond its usual valence without what makes that stable (see
    :func:`structural_alerts`)."""
    from rdkit import Chem

    symbol = atom.GetSymbol()
    usual = USUAL_VALENCE.get(symbol)
    if usual is None or atom.GetTotalValence() - atom.GetFormalCharge() <= usual:
        return False
    if symbol not in STABILISING:
        return True  # a halogen
    bonds = atom.GetBonds()
    if any(
        b.GetBondType() == Chem.BondType.DOUBLE
        and b.GetOtherAtom(atom).GetSymbol() in STABILISING[symbol]
        for b in bonds
    ):
        return False
    return sum(b.GetOtherAtom(atom).GetSymbol() == "F" for b in bonds) < 4


@cache
def _peroxide():
    """The O-O single bond pattern, compiled once per process."""
    from rdkit import Chem

    return Chem.MolFromSmarts("[OX2]-[OX2]")


def _longest_heteroatom_chain(mol) -> int:
    """Atoms in the longest simple path of N/O/S atoms over single bonds (see
    :func:`structural_alerts` for the atoms that do not continue a chain)."""
    from rdkit import Chem

    def oxo_sulfur(atom) -> bool:
        return atom.GetAtomicNum() == 16 and any(
            b.GetBondType() == Chem.BondType.DOUBLE and b.GetOtherAtom(atom).GetAtomicNum() == 8
            for b in atom.GetBonds()
        )

    hetero = {
        a.GetIdx()
        for a in atoms_of(mol)
        if a.GetAtomicNum() in HETEROATOMS
        and not (a.GetAtomicNum() == 7 and a.GetFormalCharge())
        and not oxo_sulfur(a)
    }
    neighbours: dict[int, list[int]] = {i: [] for i in hetero}
    for bond in bonds_of(mol):
        i, j = bond.GetBeginAtomIdx(), bond.GetEndAtomIdx()
        if i in hetero and j in hetero and bond.GetBondType() == Chem.BondType.SINGLE:
            neighbours[i].append(j)
            neighbours[j].append(i)
    best = 1 if hetero else 0
    for start in hetero:  # depth-first over simple paths; heteroatom clusters are tiny
        stack = [(start, frozenset([start]))]
        while stack:
            atom, seen = stack.pop()
            best = max(best, len(seen))
            if best >= 6:
                return best  # long enough to flag; stop exploring
            stack += [(n, seen | {n}) for n in neighbours[atom] if n not in seen]
    return best


class StereoForm(NamedTuple):
    """The stereoisomer whose geometry stands for a molecule (:func:`stereo_form`)."""

    #: canonical SMILES of the stereoisomer embedded: of a mirror pair, the one with the
    #: smaller canonical SMILES
    embedded: str
    #: whether the molecule is the mirror image of ``embedded``
    mirrored: bool
    #: canonical SMILES of the stereoisomer measured when the molecule left stereocentres
    #: or stereo double bonds unassigned; "" when it assigned all of them
    assigned: str = ""


def stereo_form(canonical: str) -> StereoForm:
    """Which stereoisomer a 3D measurement of ``canonical`` embeds, so that a geometry, and
    every value computed from it, is a function of the molecule and not of its spelling.

    - Unassigned stereocentres and stereo double bonds are assigned as RDKit's
      ``EnumerateStereoisomers`` assigns them first (a definite stereoisomer: ETKDG would
      otherwise pick a configuration per conformer, an ensemble of diastereomers).
    - Enantiomers have the same energy, HOMO-LUMO gap and dipole magnitude: of the
      stereoisomer and its mirror image (every tetrahedral centre inverted), the one with
      the smaller canonical SMILES is embedded, and a molecule that is the other one is
      its reflection (``mirrored``).

    Without this, the two enantiomers and the unassigned spelling of propranolol were
    three conformer searches (xTB gaps 2.88, 2.57 and 2.51 eV): three draws of one
    molecule's conformer-dependent values that the pooling of repeats could not see.
    Diastereomers stay distinct, as they are distinct molecules.
    """
    from rdkit import Chem
    from rdkit.Chem.EnumerateStereoisomers import (
        EnumerateStereoisomers,
        StereoEnumerationOptions,
    )

    mol = Chem.MolFromSmiles(canonical)
    options = StereoEnumerationOptions(
        onlyUnassigned=True, unique=True, tryEmbedding=False, maxIsomers=1
    )
    first = next(iter(EnumerateStereoisomers(mol, options=options)), None)
    assigned = Chem.MolToSmiles(first) if first is not None else canonical
    mirror = Chem.MolFromSmiles(assigned)
    inverted = {
        Chem.ChiralType.CHI_TETRAHEDRAL_CW: Chem.ChiralType.CHI_TETRAHEDRAL_CCW,
        Chem.ChiralType.CHI_TETRAHEDRAL_CCW: Chem.ChiralType.CHI_TETRAHEDRAL_CW,
    }
    for atom in atoms_of(mirror):
        tag = atom.GetChiralTag()
        if tag in inverted:
            atom.SetChiralTag(inverted[tag])
    mirrored = Chem.MolToSmiles(mirror)
    note = assigned if assigned != canonical else ""
    if mirrored < assigned:
        return StereoForm(mirrored, True, note)
    return StereoForm(assigned, False, note)
