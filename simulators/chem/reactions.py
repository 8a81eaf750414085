"""Named reaction templates (RDKit reaction SMARTS) applied to reagents.

:data:`TEMPLATES` holds the reactions of a medicinal-chemistry bench: amide coupling,
esterification, Suzuki coupling, reductive amination, SNAr, Boc deprotection,
sulfonamide formation and ester hydrolysis. :func:`run_reaction` applies one to its
reagents (tried in every order, since an agent need not know which reagent fills which
role) with ``rdkit.Chem.rdChemReactions`` and returns the sanitised, canonical products,
or a :class:`ReactionOutcome` whose ``reason`` says why nothing formed.

Several products: a template can match a reagent at more than one site (a diamine, a
dihalide). Every distinct product is reported (:attr:`ReactionOutcome.products`, sorted
best first); the *major* product is the one with the highest modelled yield, ties broken
by the canonical SMILES (a fixed, documented order).

The yield model (:func:`step_yield`) is deterministic: a per-template base yield
(:attr:`Template.base_yield`, typical isolated yields of the reaction on unhindered
substrates), times a steric factor that falls by :data:`STERIC_DROP` for every branch next to the
new bond (:func:`_steric_factor`: a tert-butyl amine couples worse than ethylamine), times an electronic factor of
the template (an aniline is a weak nucleophile, an aryl chloride a sluggish Suzuki
partner). It is a model of trends, not a prediction of a real flask.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache

#: amine nitrogen that acylates, sulfonylates and alkylates: primary or secondary, not an
#: amide, carbamate, sulfonamide, hydrazine or hydroxylamine nitrogen
AMINE = "[N;X3;H2,H1;!$(N-[C,S]=[O,N,S]);!$(N-S(=O)=O);!$(N-[#7,#8]);!$(N-C#N)]"
#: the same, aliphatic (SNAr needs a good nucleophile; anilines are too weak)
ALKYL_AMINE = "[N;X3;H2,H1;!$(N-a);!$(N-[C,S]=[O,N,S]);!$(N-S(=O)=O);!$(N-[#7,#8]);!$(N-C#N)]"
#: carboxylic acid carbon (bonded to carbon: not a carbamic acid or carbonate)
ACID = "[C;X3;$(C-[#6]);$(C(=O)[OX2H1])]"
#: aromatic carbon activated for SNAr: next to a ring nitrogen, para to one in a
#: six-membered ring, or ortho/para to a nitro or cyano group
ACTIVATED_ARYL = (
    "[c;$(c:n),$(c:c:c:n),$(c:c-[N+](=O)[O-]),$(c:c:c:c-[N+](=O)[O-]),$(c:c-C#N),$(c:c:c:c-C#N)]"
)
STERIC_DROP = 0.1
STERIC_FLOOR = 0.2


@dataclass(frozen=True)
class Template:
    """One named reaction: its SMARTS, what it needs, and its base yield."""

    name: str
    smarts: str
    #: what each reactant must be, in words (shown when the reaction does not apply)
    needs: tuple[str, ...]
    base_yield: float
    description: str
    #: map numbers of the two atoms joined by the new bond (one atom for a cleavage)
    centre: tuple[int, ...]
    #: (SMARTS, factor): the yield is multiplied by the factor where a reagent matches
    electronic: tuple[tuple[str, float], ...] = field(default_factory=tuple)

    @property
    def n_reactants(self) -> int:
        return len(self.needs)


TEMPLATES: dict[str, Template] = {
    t.name: t
    for t in (
        Template(
            "amide_coupling",
            f"{ACID[:-1]}:1](=[O:2])-[OX2H1].{AMINE[:-1]}:3]>>[C:1](=[O:2])-[N:3]",
            ("a carboxylic acid", "a primary or secondary amine"),
            0.85,
            "carboxylic acid + amine -> amide (HATU, DIPEA, DMF)",
            (1, 3),
            (("[NX3;H2,H1]-a", 0.8),),
        ),
        Template(
            "esterification",
            f"{ACID[:-1]}:1](=[O:2])-[OX2H1].[OX2H1;$(O-[CX4]);!$(O-C-[O,N]):3]"
            ">>[C:1](=[O:2])-[O:3]",
            ("a carboxylic acid", "an aliphatic alcohol"),
            0.7,
            "carboxylic acid + alcohol -> ester (Steglich: DCC, DMAP)",
            (1, 3),
            (("[OX2H1]-[CX4;H0]", 0.5), ("[OX2H1]-[CX4;H1]", 0.8)),
        ),
        Template(
            "suzuki_coupling",
            "[c:1]-[Cl,Br,I].[c:2]-[BX3](-[OX2H1])-[OX2H1]>>[c:1]-[c:2]",
            ("an aryl chloride, bromide or iodide", "an aryl boronic acid"),
            0.8,
            "aryl halide + aryl boronic acid -> biaryl (Pd(PPh3)4, K2CO3, dioxane/water)",
            (1, 2),
            (("c-Cl", 0.55), ("c-I", 1.05)),
        ),
        Template(
            "reductive_amination",
            f"[CX3;$([CH1](=O)[#6]),$([CH0](=O)([#6])[#6]):1]=[OX1].{AMINE[:-1]}:2]>>[C:1]-[N:2]",
            ("an aldehyde or ketone", "a primary or secondary amine"),
            0.75,
            "aldehyde or ketone + amine -> amine (NaBH(OAc)3, DCE)",
            (1, 2),
            (("[CX3H0](=O)([#6])[#6]", 0.75), ("[NX3;H2,H1]-a", 0.85)),
        ),
        Template(
            "snar",
            f"{ACTIVATED_ARYL[:-1]}:1]-[F,Cl].{ALKYL_AMINE[:-1]}:2]>>[c:1]-[N:2]",
            (
                "an aryl fluoride or chloride activated by a ring nitrogen or an ortho/para "
                "nitro or cyano group",
                "an aliphatic primary or secondary amine",
            ),
            0.8,
            "activated aryl fluoride/chloride + amine -> aryl amine (DIPEA, DMSO, 100 C)",
            (1, 2),
            (("c-Cl", 0.8),),
        ),
        Template(
            "boc_deprotection",
            "[N:1]-C(=O)-O-C(-[CH3])(-[CH3])-[CH3]>>[N:1]",
            ("a Boc-protected amine (tert-butyl carbamate)",),
            0.95,
            "Boc-amine -> amine (TFA, DCM)",
            (1,),
        ),
        Template(
            "sulfonamide_formation",
            f"[S;X4:1](=[O:2])(=[O:3])-Cl.{AMINE[:-1]}:4]>>[S:1](=[O:2])(=[O:3])-[N:4]",
            ("a sulfonyl chloride", "a primary or secondary amine"),
            0.85,
            "sulfonyl chloride + amine -> sulfonamide (pyridine, DCM)",
            (1, 4),
            (("[NX3;H2,H1]-a", 0.85),),
        ),
        Template(
            "ester_hydrolysis",
            "[C;$(C-[#6]):1](=[O:2])-O-[CH3,$([CH2]-[CH3])]>>[C:1](=[O:2])-[OH1]",
            ("a methyl or ethyl ester",),
            0.9,
            "methyl/ethyl ester -> carboxylic acid (LiOH, THF/water)",
            (1,),
        ),
    )
}


#: what each template's SMARTS leaves out, so that reagents and products balance:
#: alternatives of (extra reagents, by-products), the first that balances applies
#: (:func:`labtwin.simulators.chem.reaction_energy.balance_template`). The hydrogen of a
#: reductive amination comes from the hydride, written as H2; Suzuki's halide leaves with
#: the boron as a haloboronic acid (base and catalyst left out).
BY_PRODUCTS: dict[str, tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]] = {
    "amide_coupling": (((), ("O",)),),
    "esterification": (((), ("O",)),),
    "suzuki_coupling": tuple(((), (f"OB(O){x}",)) for x in ("Cl", "Br", "I")),
    "reductive_amination": ((("[H][H]",), ("O",)),),
    "snar": (((), ("F",)), ((), ("Cl",))),
    "boc_deprotection": (((), ("O=C=O", "C=C(C)C")),),
    "sulfonamide_formation": (((), ("Cl",)),),
    "ester_hydrolysis": ((("O",), ("CO",)), (("O",), ("CCO",))),
}


@dataclass(frozen=True)
class Product:
    """One distinct product: canonical SMILES and its modelled yield (fraction)."""

    smiles: str
    yield_fraction: float


@dataclass(frozen=True)
class ReactionOutcome:
    """What a reaction gave: distinct products, best first, or ``reason`` why none."""

    reaction: str
    reagents: tuple[str, ...]
    products: tuple[Product, ...] = ()
    reason: str = ""

    @property
    def ok(self) -> bool:
        return bool(self.products)

    @property
    def major(self) -> Product:
        """The major product: highest modelled yield, ties broken by canonical SMILES."""
        return self.products[0]


@cache
def _reaction(name: str):
    from rdkit.Chem import rdChemReactions

    rxn = rdChemReactions.ReactionFromSmarts(TEMPLATES[name].smarts)
    rxn.Initialize()
    return rxn


@cache
def _pattern(smarts: str):
    from rdkit import Chem

    return Chem.MolFromSmarts(smarts)


def _steric_factor(product, centre_atoms: list[int]) -> float:
    """Branching next to the new bond: every substituent beyond two on a non-aromatic
    neighbour of a centre atom (an isopropyl CH counts 1, a tert-butyl C 2) and beyond
    three on a centre atom costs :data:`STERIC_DROP` of the yield (floor
    :data:`STERIC_FLOOR`). Aromatic neighbours are flat and count nothing."""
    centre = set(centre_atoms)
    index = 0
    for i in centre:
        atom = product.GetAtomWithIdx(i)
        index += max(atom.GetDegree() - 3, 0)
        for n in atom.GetNeighbors():
            if n.GetIdx() not in centre and not n.GetIsAromatic():
                index += max(n.GetDegree() - 2, 0)
    return max(STERIC_FLOOR, 1.0 - STERIC_DROP * index)


def step_yield(template: Template, reagents: list, product, centre_atoms: list[int]) -> float:
    """Modelled isolated yield (0..1) of one product: base x steric x electronic."""
    value = template.base_yield * _steric_factor(product, centre_atoms)
    for smarts, factor in template.electronic:
        if any(m.HasSubstructMatch(_pattern(smarts)) for m in reagents):
            value *= factor
    return float(min(max(value, 0.0), 0.99))


def run_reaction(name: str, reagents: list) -> ReactionOutcome:
    """Apply template ``name`` to parsed, sanitised RDKit molecules ``reagents``.

    Reagents are tried in every order. Products that RDKit cannot sanitise are dropped.
    Never raises for chemistry that does not fit; an unknown template name is a bug
    (a ``KeyError``).
    """
    from itertools import permutations

    from rdkit import Chem

    template = TEMPLATES[name]
    shown = tuple(Chem.MolToSmiles(m) for m in reagents)
    if len(reagents) != template.n_reactants:
        return ReactionOutcome(
            name,
            shown,
            reason=f"{name} takes {template.n_reactants} reagent(s) "
            f"({' + '.join(template.needs)}), got {len(reagents)}",
        )
    rxn = _reaction(name)
    found: dict[str, float] = {}
    for order in set(permutations(range(len(reagents)))):
        ordered = [reagents[i] for i in order]
        for products in rxn.RunReactants(tuple(ordered), 50):
            for product in products:
                try:
                    Chem.SanitizeMol(product)
                except Exception:  # noqa: BLE001 - RDKit raises several types for bad valences
                    continue
                centre = [
                    a.GetIdx()
                    for a in product.GetAtoms()
                    if a.HasProp("old_mapno") and a.GetIntProp("old_mapno") in template.centre
                ]
                smiles = Chem.MolToSmiles(product)
                canonical = Chem.MolFromSmiles(smiles)
                if canonical is None:
                    continue
                smiles = Chem.MolToSmiles(canonical)
                y = step_yield(template, ordered, product, centre)
                found[smiles] = max(found.get(smiles, 0.0), y)
    if not found:
        return ReactionOutcome(
            name,
            shown,
            reason=f"{name} does not apply to {' + '.join(shown)}: it needs "
            f"{' + '.join(template.needs)}",
        )
    ranked = sorted(found.items(), key=lambda kv: (-round(kv[1], 12), kv[0]))
    return ReactionOutcome(name, shown, tuple(Product(s, y) for s, y in ranked))


def reactive_roles(name: str, mol) -> list[int]:
    """Which reactant roles of template ``name`` the molecule can fill (0-based)."""
    rxn = _reaction(name)
    return [
        k
        for k in range(rxn.GetNumReactantTemplates())
        if mol.HasSubstructMatch(rxn.GetReactantTemplate(k))
    ]
