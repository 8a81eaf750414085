"""GFN2-xTB reaction energies: products minus reagents, from the engine's xTB measurements.

:func:`reaction_energy` (also :meth:`MoleculeEngine.reaction_energy
<labtwin.simulators.chem.engine.MoleculeEngine.reaction_energy>`) takes the SMILES of a
reaction's reagents and products (a molecule that takes part twice is listed twice) and
returns

    delta_e = sum(E_xtb(products)) - sum(E_xtb(reagents))   [Hartree, and kJ/mol]

where ``E_xtb`` is the GFN2-xTB total energy of the molecule's lowest MMFF94 conformer:
exactly the ``xtb_energy`` of an ``"xtb"`` measurement
(:meth:`~labtwin.simulators.chem.engine.MoleculeEngine.measure`), computed in the same
workers and served from the same cache, so a molecule met in two reactions is computed once.

It is an electronic energy difference at fixed geometries (MMFF94 conformers, no xTB
relaxation, no zero-point or thermal terms, gas phase): a reaction *energy*, not an
enthalpy or a free energy. Its sign is meaningful for strongly exo- or endothermic
reactions; near-thermoneutral condensations (an amide coupling releasing water) are
within the method's error of zero.

Refused, with the reason (:class:`ReactionEnergy` ``invalid``): a SMILES that RDKit cannot
read (RDKit's own message) or that screening refuses (a charge, fragments, a metal), an
empty side, and sides whose element counts (hydrogens included) differ. Reaction templates
drop their leaving groups, so a template's product alone never balances its reagents:
:func:`balance_template` adds the by-products of :data:`~labtwin.simulators.chem.reactions.BY_PRODUCTS`
(water for an amide coupling or an esterification). A molecule whose xTB measurement
failed (MMFF94 has no parameters for H2, HF, HCl, HBr or a boronic acid) makes the
reaction ``failed`` with that molecule's reason.

The energies are only as good as the MMFF94 geometries: RDKit's MMFF94 gives CO2 a C=O
bond of 1.405 A (1.16 A in the molecule), which puts its xTB energy 0.17 Eh (450 kJ/mol)
above the linear molecule at 1.16 A, so a reaction that makes CO2 (a Boc deprotection)
comes out far too endothermic.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from labtwin.simulators.chem.molecule import parse_smiles

if TYPE_CHECKING:
    from labtwin.simulators.chem.engine import MoleculeEngine

#: kJ/mol per Hartree (CODATA 2018: E_h = 4.3597447222071e-18 J, N_A = 6.02214076e23 / mol)
KJ_PER_MOL_PER_HARTREE = 2625.4996394799


@dataclass(frozen=True)
class ReactionEnergy:
    """A reaction's GFN2-xTB energy: ``status`` ``ok`` / ``invalid`` / ``failed`` with
    ``reason``; ``reagents`` and ``products`` as canonical SMILES, ``energies_hartree`` each
    molecule's total energy [Eh], ``delta_hartree`` and ``delta_kj_mol`` products minus
    reagents."""

    status: Literal["ok", "invalid", "failed"]
    reagents: tuple[str, ...] = ()
    products: tuple[str, ...] = ()
    energies_hartree: dict[str, float] = field(default_factory=dict)
    delta_hartree: float = float("nan")
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def delta_kj_mol(self) -> float:
        return self.delta_hartree * KJ_PER_MOL_PER_HARTREE


def element_counts(mol) -> Counter:
    """Atoms of each element of an RDKit molecule, implicit hydrogens included."""
    counts = Counter(atom.GetSymbol() for atom in mol.GetAtoms())
    counts["H"] += sum(atom.GetTotalNumHs() for atom in mol.GetAtoms())
    return +counts  # drops a zero "H" entry


def _formula(counts: Counter) -> str:
    """Hill order (C, H, then alphabetical), e.g. ``C2H6O``; "nothing" for an empty side."""
    order = sorted(counts, key=lambda e: (e != "C", e != "H", e))
    text = "".join(f"{e}{counts[e] if counts[e] > 1 else ''}" for e in order if counts[e])
    return text or "nothing"


def _side(
    smiles: list[str] | tuple[str, ...], name: str, engine: MoleculeEngine | None = None
) -> tuple[list[str], Counter] | str:
    """Canonical SMILES and element counts of one side, or why it cannot be read (or, with
    an ``engine``, why its screening refuses a molecule)."""
    if isinstance(smiles, str) or not isinstance(smiles, (list, tuple)):
        return f"{name} must be a list of SMILES, got {type(smiles).__name__}"
    if not smiles:
        return f"no {name}"
    canonical, counts = [], Counter()
    for i, s in enumerate(smiles, 1):
        parsed = parse_smiles(s)
        if not parsed.ok:
            return f"{name[:-1]} {i}: {parsed.reason}"
        if engine is not None:
            screened = engine.screen(s)
            if not isinstance(screened, str):
                return f"{name[:-1]} {i}: {screened.reason}"
        canonical.append(parsed.canonical)
        counts += element_counts(parsed.mol)
    return canonical, counts


def reaction_energy(
    engine: MoleculeEngine, reagents: list[str], products: list[str]
) -> ReactionEnergy:
    """GFN2-xTB energy of ``reagents -> products`` (see the module docs); never raises for
    bad input."""
    sides = [_side(reagents, "reagents", engine), _side(products, "products", engine)]
    for side in sides:
        if isinstance(side, str):
            return ReactionEnergy("invalid", reason=side)
    (left, left_counts), (right, right_counts) = sides  # type: ignore[misc]
    if left_counts != right_counts:
        missing = _formula(left_counts - right_counts)
        extra = _formula(right_counts - left_counts)
        return ReactionEnergy(
            "invalid",
            tuple(left),
            tuple(right),
            reason=f"unbalanced: the reagents hold {_formula(left_counts)}, the products "
            f"{_formula(right_counts)} (the products lack {missing} and have {extra} too "
            "many); add the missing species, such as a template's leaving group (water for "
            "an amide coupling)",
        )
    unique = list(dict.fromkeys(left + right))
    results = engine.measure(unique, "xtb")
    energies = {}
    for smiles, result in zip(unique, results):
        if not result.ok:
            role = "reagent" if smiles in left else "product"
            return ReactionEnergy(
                result.status,
                tuple(left),
                tuple(right),
                reason=f"{role} {smiles}: {result.reason}",
            )
        energies[smiles] = result.values["xtb_energy"]
    delta = sum(energies[s] for s in right) - sum(energies[s] for s in left)
    return ReactionEnergy("ok", tuple(left), tuple(right), energies, float(delta))


def balance_template(
    name: str, reagents: list[str], products: list[str]
) -> tuple[list[str], list[str]] | None:
    """``reagents`` and ``products`` of template ``name`` with its by-products added
    (the first alternative of :data:`~labtwin.simulators.chem.reactions.BY_PRODUCTS` that
    balances the elements), or None when none does (unreadable SMILES included)."""
    from labtwin.simulators.chem.reactions import BY_PRODUCTS

    for extra_reagents, extra_products in BY_PRODUCTS[name]:
        left = _side([*reagents, *extra_reagents], "reagents")
        right = _side([*products, *extra_products], "products")
        if isinstance(left, str) or isinstance(right, str):
            return None
        if left[1] == right[1]:
            return [*reagents, *extra_reagents], [*products, *extra_products]
    return None
