"""Synthesis planning: make a target molecule from purchasable building blocks.

An experiment runs one named reaction (:data:`labtwin.simulators.chem.reactions.TEMPLATES`)
on one or two reagents, as JSON such as
``{"reaction": "amide_coupling", "reagents": ["CC(=O)O", "CCN"]}``. A reagent is a SMILES
of the shipped stock (:data:`STOCK`, ``tasks/data/building_blocks.csv``: 302 real
building blocks with a price per mmol) or of a product that an earlier experiment of the
campaign made (the campaign's *inventory*). RDKit applies the template; the major
product (highest modelled yield) is isolated and joins the inventory, other products are
listed in the measurement's notes.

The campaign's target is built at its start by running templates forward on stock
reagents (1 to 3 steps, drawn from the campaign's seed), so every target is reachable;
the hidden conditions keep the construction route (``route``). A measurement reports the
product's Morgan Tanimoto similarity to the target, whether it *is* the target (canonical
SMILES equal), the modelled step yield and what the product's route took: steps, yield
(the product of step yields along the route), money (:data:`STEP_FEE_USD` a step plus
:data:`HANDLING_FEE_USD` and the catalogue price of 1 mmol of each purchased reagent).

Score, from the measurement alone: ``similarity - route_cost / 1000 USD -
YIELD_WEIGHT * (1 - route_yield)``, clipped to [0, 1], where similarity is 1 for the
target itself and :data:`INEXACT_WEIGHT` times the Tanimoto similarity otherwise, so no
look-alike (at most 0.774) reaches the target made by its construction route (at least
0.804; :data:`INEXACT_WEIGHT` says why). A campaign succeeds when it makes the target.
Everything is deterministic (the yield model has no noise): no error bars, nothing to
calibrate, repeats are not pooled and there is no closing confirmation.

Invalid (paid nothing): a reaction name not in the list, the wrong number of reagents,
a SMILES RDKit cannot read, a reagent neither in the stock nor in the inventory, a
reaction that does not apply to the reagents, and a major product the lab could not take
back as a reagent (over :data:`MAX_REAGENT_CHARS` characters of SMILES or
:data:`MAX_PRODUCT_HEAVY_ATOMS` heavy atoms: an amino acid coupled to itself doubles with
every step).

The inventory is a function of the campaign's proposals: it is the set of products of
its ``ok`` experiments so far, in order (the :meth:`SynthesisPlanning.inventory_tool`
analysis tool reads it from the measured history). Because ``Task.simulate`` sees a
campaign's conditions but not its history, the lab keeps a copy of the inventory in the
campaign's conditions dict (``inventory``; added by :meth:`SynthesisPlanning.run` in the
calling process after each batch, so worker isolation does not lose it). A conditions
dict copied into a new campaign starts with an empty inventory (``inventory_owner``
records the dict it belongs to), and a campaign's recorded start conditions hold none.

``impossible=True`` puts a trimethylsilyl group on the target: no building block has
silicon and no template adds atoms, so no sequence of experiments reaches it.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field

from labtwin import Experiment, Measurement, ObservableSpec, Task, Value, register_task
from labtwin.frames import structure_panel
from labtwin.simulators.chem import parse_smiles
from labtwin.simulators.chem.conformers import embed_conformer
from labtwin.simulators.chem.descriptors import tanimoto
from labtwin.simulators.chem.reactions import TEMPLATES, reactive_roles, run_reaction
from labtwin.task import AnalysisTool, package_versions

STEP_FEE_USD = 20.0  # bench time of one reaction and its work-up
HANDLING_FEE_USD = 5.0  # ordering and weighing one purchased reagent
COST_SCALE_USD = 1000.0  # a route that costs this much loses 1 of score
YIELD_WEIGHT = 0.1  # score lost by a route of zero overall yield
#: a product that is not the target scores this times its Tanimoto similarity. Morgan
#: bits ignore how often an environment occurs, so a molecule short of a repeated unit
#: (a biaryl against its terphenyl target) has Tanimoto 1.0; under v0's cap of 0.95 such
#: a one-step look-alike outscored the target made by its two-step route (0.898 against
#: 0.862). The worst construction route scores at least 1 - (3 steps x 20 + 4 purchases x
#: (5 + 4)) / 1000 - 0.1 = 0.804 and the cheapest look-alike pays at least (20 + 5 +
#: 0.1) / 1000 + 0.1 x (1 - 0.99) = 0.026, so 0.8 keeps every look-alike (<= 0.774) below
#: every construction route.
INEXACT_WEIGHT = 0.8
MAX_REAGENT_CHARS = 300  # what parse_smiles reads at all
MAX_TARGET_HEAVY_ATOMS = 60
#: twice the largest target: an honest route's intermediates are a target at most plus a
#: protecting group, and the product's conformer (about 3 s at 130 heavy atoms) stays quick.
#: v0 isolated anything and raised on a product over MAX_REAGENT_CHARS (glycine coupled
#: to itself six times: 257 heavy atoms, 449 characters).
MAX_PRODUCT_HEAVY_ATOMS = 2 * MAX_TARGET_HEAVY_ATOMS
TARGET_STEPS_P = {1: 0.3, 2: 0.4, 3: 0.3}
TARGET_RESTARTS = 20
REACTIONS = tuple(TEMPLATES)
ReactionName = Literal[REACTIONS]  # type: ignore[valid-type]


@dataclass(frozen=True)
class BuildingBlock:
    smiles: str  # canonical
    name: str
    kind: str
    price_usd_per_mmol: float


@cache
def stock() -> dict[str, BuildingBlock]:
    """The shipped building blocks by canonical SMILES (the file's order)."""
    text = resources.files("labtwin.tasks").joinpath("data/building_blocks.csv").read_text()
    out: dict[str, BuildingBlock] = {}
    for row in csv.DictReader(text.splitlines()):
        parsed = parse_smiles(row["smiles"])
        if not parsed.ok:
            raise ValueError(f"building block {row['name']!r} does not parse: {parsed.reason}")
        out[parsed.canonical] = BuildingBlock(
            parsed.canonical, row["name"], row["class"], float(row["price_usd_per_mmol"])
        )
    return out


@lru_cache(maxsize=4096)  # bounded: products of many campaigns pass through it
def _mol(smiles: str):
    parsed = parse_smiles(smiles)
    assert parsed.ok, parsed.reason
    return parsed.mol


@lru_cache(maxsize=1024)
def _product_conformer(smiles: str) -> tuple[tuple[str, np.ndarray], ...]:
    structure = embed_conformer(_mol(smiles))
    return tuple(structure.items()) if structure else ()


def product_structure(smiles: str) -> dict[str, np.ndarray]:
    """The product's conformer (ETKDG + MMFF94 with hydrogens, the design lab's embedding
    with one conformer; about 10-150 ms, once per product and process) as
    :mod:`labtwin.structures` artifacts; empty if ETKDG gives up."""
    return {name: array.copy() for name, array in _product_conformer(smiles)}


@cache
def role_candidates(reaction: str) -> tuple[tuple[str, ...], ...]:
    """Stock SMILES that can fill each reactant role of a template (the file's order)."""
    n = TEMPLATES[reaction].n_reactants
    roles: list[list[str]] = [[] for _ in range(n)]
    for smiles in stock():
        for k in reactive_roles(reaction, _mol(smiles)):
            roles[k].append(smiles)
    return tuple(tuple(r) for r in roles)


class SynthesisStep(Experiment):
    """One reaction on one or two reagents (stock building blocks or earlier products)."""

    reaction: ReactionName = Field(  # type: ignore[valid-type]
        description="the named reaction: "
        + "; ".join(f"{t.name}: {t.description}" for t in TEMPLATES.values())
    )
    reagents: list[Annotated[str, Field(min_length=1, max_length=MAX_REAGENT_CHARS)]] = Field(
        min_length=1,
        max_length=2,
        description="SMILES of the reagents (any order): stock building blocks or products "
        "of earlier experiments of this campaign",
    )


OBSERVABLES = (
    ObservableSpec("tanimoto_to_target", "", "Morgan (r=2, 2048 bits) Tanimoto to the target"),
    ObservableSpec("exact_match", "", "1 if the product is the target (canonical SMILES)"),
    ObservableSpec("step_yield", "", "modelled isolated yield of this reaction"),
    ObservableSpec("route_yield", "", "product of the step yields along the product's route"),
    ObservableSpec("route_steps", "", "reaction steps of the product's route", 3.0),
    ObservableSpec("route_cost", "USD", "fees and purchases of the product's route", 100.0),
    ObservableSpec("route_purchases", "", "reagents bought along the product's route", 4.0),
    ObservableSpec("purchased_reagents", "", "reagents bought for this experiment", 2.0),
    ObservableSpec("n_products", "", "distinct products the template gave", 2.0),
    ObservableSpec("product_heavy_atoms", "", "heavy atoms of the isolated product", 50.0),
)
PUBLIC = (
    ObservableSpec("target_heavy_atoms", "", "heavy atoms of the target", 50.0),
    ObservableSpec("target_molecular_weight", "g/mol", "molecular weight of the target", 500.0),
)
#: the nominal campaign: Suzuki coupling of 4-bromobenzoic acid and 4-fluorophenylboronic
#: acid, then amide coupling with morpholine
NOMINAL_ROUTE = (
    ("suzuki_coupling", ("OC(=O)c1ccc(Br)cc1", "OB(O)c1ccc(F)cc1")),
    ("amide_coupling", ("@1", "C1COCCN1")),
)


def similarity(measurement: Measurement) -> float:
    """1 for the target itself; :data:`INEXACT_WEIGHT` times the Tanimoto similarity
    otherwise."""
    if measurement["exact_match"] >= 1.0:
        return 1.0
    return INEXACT_WEIGHT * measurement["tanimoto_to_target"]


def synthesis_score(measurement: Measurement) -> float:
    """Similarity less the route's cost (per :data:`COST_SCALE_USD`) and its yield loss."""
    return (
        similarity(measurement)
        - measurement["route_cost"] / COST_SCALE_USD
        - YIELD_WEIGHT * (1.0 - measurement["route_yield"])
    )


def _describe_molecule(smiles: str) -> dict[str, float]:
    from rdkit.Chem import Descriptors

    mol = _mol(smiles)
    return {
        "target_heavy_atoms": float(mol.GetNumHeavyAtoms()),
        "target_molecular_weight": round(float(Descriptors.MolWt(mol)), 3),
    }


def add_trimethylsilyl(smiles: str, rng: np.random.Generator) -> str:
    """``smiles`` with one C-H hydrogen (drawn by ``rng``) replaced by Si(CH3)3."""
    from rdkit import Chem

    mol = Chem.RWMol(_mol(smiles))
    sites = [a.GetIdx() for a in mol.GetAtoms() if a.GetSymbol() == "C" and a.GetTotalNumHs() > 0]
    site = sites[int(rng.integers(len(sites)))]
    si = mol.AddAtom(Chem.Atom(14))
    mol.AddBond(site, si, Chem.BondType.SINGLE)
    for _ in range(3):
        mol.AddBond(si, mol.AddAtom(Chem.Atom(6)), Chem.BondType.SINGLE)
    atom = mol.GetAtomWithIdx(site)
    atom.SetNumExplicitHs(0)
    atom.SetNoImplicit(False)
    Chem.SanitizeMol(mol)
    return Chem.MolToSmiles(mol)


def _extend(rng: np.random.Generator, current: str) -> dict[str, Any] | None:
    """One forward step: a template (and role) the intermediate fits, stock partners drawn
    by ``rng`` (``current`` empty: a two-reagent reaction of stock molecules). The step,
    or None where its product is not new (the intermediate, a stock molecule, several
    fragments) or is too big."""
    if not current:
        names = [n for n, t in TEMPLATES.items() if t.n_reactants == 2]
        name = names[int(rng.integers(len(names)))]
        reagents = [r[int(rng.integers(len(r)))] for r in role_candidates(name)]
    else:
        fits = [(n, k) for n in REACTIONS for k in reactive_roles(n, _mol(current))]
        if not fits:
            return None
        name, role = fits[int(rng.integers(len(fits)))]
        roles = role_candidates(name)
        reagents = [
            current if k == role else roles[k][int(rng.integers(len(roles[k])))]
            for k in range(len(roles))
        ]
    outcome = run_reaction(name, [_mol(s) for s in reagents])
    if not outcome.ok:
        return None
    product = outcome.major.smiles
    if product == current or product in stock() or "." in product:
        return None
    if _mol(product).GetNumHeavyAtoms() > MAX_TARGET_HEAVY_ATOMS:
        return None
    return {"reaction": name, "reagents": reagents, "product": product}


def build_target(rng: np.random.Generator, n_steps: int) -> tuple[str, list[dict[str, Any]]]:
    """A target made by running ``n_steps`` templates forward on stock reagents.

    Step 1 is a two-reagent reaction of stock molecules; each later step puts the
    intermediate into a template it fits (with stock partners). A route that cannot be
    extended (the intermediate fits no template, or its products are not new) is drawn
    again from the start, up to :data:`TARGET_RESTARTS` times; after that the longest
    route drawn is kept. Returns the target and its route (reagents as SMILES,
    intermediates included).
    """
    best: list[dict[str, Any]] = []
    for _restart in range(TARGET_RESTARTS):
        route: list[dict[str, Any]] = []
        while len(route) < n_steps:
            step = _extend(rng, route[-1]["product"] if route else "")
            if step is None:
                break
            route.append(step)
        if len(route) > len(best):
            best = route
        if len(best) == n_steps:
            break
    if not best:  # cannot happen with the shipped stock; a bug if it does
        raise RuntimeError("no first step could be built from the stock")
    return best[-1]["product"], best


@register_task
class SynthesisPlanning(Task):
    """Make a target molecule from purchasable building blocks with named reactions.

    Success: an experiment makes the target (canonical SMILES equal). ``impossible=True``:
    the target carries a trimethylsilyl group that nothing in the stock provides.
    """

    id = "SynthesisPlanning-v1"
    experiment_model = SynthesisStep
    observables = OBSERVABLES
    public_conditions = PUBLIC
    cost_unit = "USD"
    default_budget = 10
    score_range = (0.0, 1.0)
    pool_repeats = False  # measurements are deterministic; a product's route can get cheaper
    turns_per_experiment = 3  # room for stock and inventory look-ups
    reward_description = (
        "similarity of the product to the target (1 for the target itself, "
        f"{INEXACT_WEIGHT:g} x Tanimoto otherwise) less route cost / {COST_SCALE_USD:g} USD "
        f"and {YIELD_WEIGHT:g} x (1 - route yield)"
    )
    brief = f"""
You plan syntheses. Each campaign has a target molecule (a SMILES string). Each experiment
runs one named reaction on one or two reagents, as JSON: {{"reaction": "amide_coupling",
"reagents": ["CC(=O)O", "CCN"]}}. A reagent is a building block from the stock (about 300
purchasable acids, amines, alcohols, aryl halides, boronic acids, aldehydes, ketones,
activated aryl fluorides/chlorides, Boc-protected amines, sulfonyl chlorides and esters;
look them up with the `stock` tool) or a product of an earlier experiment of this campaign
(your inventory; the `inventory` tool lists it). Reactions: {", ".join(REACTIONS)}.
{" ".join(f"{t.name}: {t.description}." for t in TEMPLATES.values())}
The reaction's major product (highest yield) is isolated and joins your inventory; the
measurement reports its SMILES, its Tanimoto similarity to the target, the step yield and
its route's steps, overall yield and cost (a reaction costs {STEP_FEE_USD:g} USD; each
purchased reagent {HANDLING_FEE_USD:g} USD plus its price per mmol). The score of an
experiment is the product's similarity to the target (1 for the target itself,
{INEXACT_WEIGHT:g} x the Tanimoto similarity for any other product) less route cost /
{COST_SCALE_USD:g} USD and {YIELD_WEIGHT:g} x (1 - route yield). Reagents that are
neither in the stock nor in the inventory, unreadable SMILES, reactions that do not apply
and products over {MAX_PRODUCT_HEAVY_ATOMS} heavy atoms are invalid and score nothing.
Targets are reachable in 1 to 3 steps. Make the target, by a short, cheap, high-yield
route, within the budget.
"""

    def __init__(self, budget: int | None = None, impossible: bool = False) -> None:
        super().__init__(budget)
        self.impossible = bool(impossible)

    # ---- campaigns -------------------------------------------------------------------

    def nominal_conditions(self) -> dict[str, Any]:
        route: list[dict[str, Any]] = []
        product = ""
        for name, reagents in NOMINAL_ROUTE:
            smiles = [product if r == "@1" else parse_smiles(r).canonical for r in reagents]
            product = run_reaction(name, [_mol(s) for s in smiles]).major.smiles
            route.append({"reaction": name, "reagents": smiles, "product": product})
        target = product
        if self.impossible:
            target = add_trimethylsilyl(product, np.random.default_rng(0))
        return {"target": target, "route": route, **_describe_molecule(target)}

    def sample_conditions(self, rng: np.random.Generator) -> dict[str, Any]:
        steps = list(TARGET_STEPS_P)
        n_steps = int(rng.choice(steps, p=[TARGET_STEPS_P[s] for s in steps]))
        target, route = build_target(rng, n_steps)
        if self.impossible:
            target = add_trimethylsilyl(target, rng)
        return {"target": target, "route": route, **_describe_molecule(target)}

    def describe_conditions(self, conditions: dict[str, Any]) -> str:
        return (
            f"Target molecule: {conditions['target']} "
            f"({conditions['target_heavy_atoms']:.0f} heavy atoms, "
            f"{conditions['target_molecular_weight']:.1f} g/mol)."
        )

    def random_experiment(self, rng: np.random.Generator) -> SynthesisStep:
        """A template and stock reagents that fill its roles (a reaction that applies)."""
        for _ in range(50):
            name = REACTIONS[int(rng.integers(len(REACTIONS)))]
            reagents = [r[int(rng.integers(len(r)))] for r in role_candidates(name)]
            if run_reaction(name, [_mol(s) for s in reagents]).ok:
                return SynthesisStep(reaction=name, reagents=reagents)
        raise RuntimeError("no random reaction applied in 50 draws (a stock or template bug)")

    def success(self, records: list[Any], conditions: dict[str, Any]) -> bool:
        """The campaign made the target."""
        return any(
            r.kind == "experiment" and r.measurement.ok and r.measurement["exact_match"] >= 1.0
            for r in records
        )

    # ---- the inventory ------------------------------------------------------------------

    @staticmethod
    def _inventory(conditions: dict[str, Any]) -> dict[str, dict[str, float]]:
        """This campaign's inventory; a conditions dict copied from another starts empty."""
        if conditions.get("inventory_owner") != id(conditions):
            conditions["inventory"] = {}
            conditions["inventory_owner"] = id(conditions)
        return conditions["inventory"]

    def run(self, proposals, conditions, seeds):  # noqa: D102 (documented on Task)
        for c in conditions:  # in the calling process: isolation pickles conditions
            self._inventory(c)
        measured = super().run(proposals, conditions, seeds)
        for m, c in zip(measured, conditions):
            if m.ok:
                entry = dict(m.provenance["route"])
                inventory = self._inventory(c)
                known = inventory.get(m.provenance["product"])
                if known is None or entry["route_cost"] < known["route_cost"]:
                    inventory[m.provenance["product"]] = entry
        return measured

    # ---- measuring -------------------------------------------------------------------

    def simulate(self, experiments, conditions, rngs):  # noqa: D102 (documented on Task)
        return [self._one(e, c) for e, c in zip(experiments, conditions)]

    def _source(self, canonical: str, inventory: dict[str, dict[str, float]]) -> dict | None:
        """Where a reagent comes from (the cheaper of the inventory and the stock), or None."""
        options = []
        if canonical in inventory:
            options.append({"source": "inventory", **inventory[canonical]})
        block = stock().get(canonical)
        if block is not None:
            options.append(
                {
                    "source": "stock",
                    "route_steps": 0.0,
                    "route_yield": 1.0,
                    "route_cost": HANDLING_FEE_USD + block.price_usd_per_mmol,
                    "route_purchases": 1.0,
                }
            )
        return min(options, key=lambda o: o["route_cost"]) if options else None

    def _one(self, e: SynthesisStep, conditions: dict[str, Any]) -> Measurement:
        provenance = {
            "simulator": "labtwin.simulators.chem.reactions (RDKit reaction templates)",
            "device": "cpu",
            "versions": package_versions("rdkit"),
        }
        template = TEMPLATES[e.reaction]
        if len(e.reagents) != template.n_reactants:
            return Measurement.invalid(
                f"{e.reaction} takes {template.n_reactants} reagent(s) "
                f"({' + '.join(template.needs)}), got {len(e.reagents)}",
                **provenance,
            )
        inventory = conditions.get("inventory", {})
        mols, sources = [], []
        for k, smiles in enumerate(e.reagents):
            parsed = parse_smiles(smiles)
            if not parsed.ok:
                return Measurement.invalid(f"reagent {k + 1}: {parsed.reason}", **provenance)
            if "." in parsed.canonical:
                return Measurement.invalid(
                    f"reagent {k + 1} is several molecules ('.'): give one per entry",
                    **provenance,
                )
            source = self._source(parsed.canonical, inventory)
            if source is None:
                return Measurement.invalid(
                    f"reagent {k + 1} ({parsed.canonical[:80]}) is neither in the stock nor "
                    "in this campaign's inventory (products of its earlier experiments)",
                    **provenance,
                )
            mols.append(parsed.mol)
            sources.append((parsed.canonical, source))
        outcome = run_reaction(e.reaction, mols)
        if not outcome.ok:
            return Measurement.invalid(outcome.reason[:400], **provenance)
        major = outcome.major
        too_big = len(major.smiles) > MAX_REAGENT_CHARS or (
            _mol(major.smiles).GetNumHeavyAtoms() > MAX_PRODUCT_HEAVY_ATOMS
        )
        if too_big:
            return Measurement.invalid(
                f"the product ({major.smiles[:60]}...) is too big to isolate: at most "
                f"{MAX_PRODUCT_HEAVY_ATOMS} heavy atoms and {MAX_REAGENT_CHARS} characters of "
                "SMILES, so that it can be a reagent again",
                **provenance,
            )
        product = _mol(major.smiles)
        route = {
            "route_steps": 1.0 + sum(s["route_steps"] for _, s in sources),
            "route_yield": major.yield_fraction
            * float(np.prod([s["route_yield"] for _, s in sources])),
            "route_cost": STEP_FEE_USD + sum(s["route_cost"] for _, s in sources),
            "route_purchases": sum(s["route_purchases"] for _, s in sources),
        }
        purchased = [smiles for smiles, s in sources if s["source"] == "stock"]
        exact = major.smiles == conditions["target"]
        values = {
            "tanimoto_to_target": tanimoto(product, _mol(conditions["target"])),
            "exact_match": float(exact),
            "step_yield": major.yield_fraction,
            **route,
            "purchased_reagents": float(len(purchased)),
            "n_products": float(len(outcome.products)),
            "product_heavy_atoms": float(product.GetNumHeavyAtoms()),
        }
        notes = [f"product {major.smiles} joins the inventory" + (" (the target)" if exact else "")]
        if len(outcome.products) > 1:
            others = ", ".join(
                f"{p.smiles} ({p.yield_fraction:.2f})" for p in outcome.products[1:6]
            )
            notes.append(
                f"{len(outcome.products)} products; the major one is isolated; others: {others}"
            )
        cost = STEP_FEE_USD + sum(
            HANDLING_FEE_USD + stock()[s].price_usd_per_mmol for s in purchased
        )
        return Measurement(
            "ok",
            {spec.name: Value(float(values[spec.name]), spec.unit) for spec in OBSERVABLES},
            artifacts=product_structure(major.smiles),
            cost=cost,
            provenance={
                **provenance,
                "product": major.smiles,
                "products": [p.smiles for p in outcome.products],
                "reagents": [{"smiles": s, "source": src["source"]} for s, src in sources],
                "route": route,
            },
            notes=notes,
        )

    def reward(self, measurement: Measurement, conditions: dict[str, Any]) -> float:
        return synthesis_score(measurement)

    def frame_panel(self, records, conditions):  # noqa: D102 (documented on Task)
        return structure_panel(records, "no product yet")

    # ---- analysis tools (cost no experiment) --------------------------------------------

    def analysis_tools(self) -> list[AnalysisTool]:
        return [
            AnalysisTool(
                "inventory",
                "List the products this campaign has made (SMILES, route steps, yield, cost).",
                {"type": "object", "properties": {}, "additionalProperties": False},
                self.inventory_tool,
            ),
            AnalysisTool(
                "stock",
                "Search the purchasable building blocks by class and/or substructure.",
                {
                    "type": "object",
                    "properties": {
                        "kind": {
                            "type": "string",
                            "enum": sorted({b.kind for b in stock().values()}),
                            "description": "class of building block",
                        },
                        "substructure": {
                            "type": "string",
                            "description": "SMARTS or SMILES the building block must contain",
                        },
                    },
                    "additionalProperties": False,
                },
                self.stock_tool,
            ),
        ]

    @staticmethod
    def inventory_tool(arguments: dict[str, Any], history: list[Measurement]) -> str:
        """The products of the campaign's ``ok`` experiments (what it may use as reagents)."""
        rows: dict[str, str] = {}
        for m in history:
            if m.ok and "product" in m.provenance:
                r = m.provenance["route"]
                rows.setdefault(
                    m.provenance["product"],
                    f"{m.provenance['product']} ({r['route_steps']:.0f} steps, yield "
                    f"{r['route_yield']:.2f}, {r['route_cost']:.1f} USD)",
                )
        return "Inventory: " + ("; ".join(rows.values()) if rows else "empty (nothing made yet)")

    @staticmethod
    def stock_tool(arguments: dict[str, Any], history: list[Measurement], limit: int = 40) -> str:
        """Up to ``limit`` building blocks of a class and/or with a substructure."""
        from rdkit import Chem, rdBase

        if not isinstance(arguments, dict):
            raise ValueError("arguments must be an object")
        unknown = set(arguments) - {"kind", "substructure"}
        if unknown:
            raise ValueError(f"unknown arguments {sorted(unknown)}")
        kind = arguments.get("kind")
        pattern = None
        if arguments.get("substructure"):
            text = str(arguments["substructure"])[:200]
            with rdBase.BlockLogs():  # the reason below says it; no log spam
                pattern = Chem.MolFromSmarts(text)
            if pattern is None:
                raise ValueError(f"substructure {text!r} is not a SMARTS RDKit can read")
        hits = [
            b
            for b in stock().values()
            if (kind is None or b.kind == kind)
            and (pattern is None or _mol(b.smiles).HasSubstructMatch(pattern))
        ]
        shown = "; ".join(
            f"{b.smiles} ({b.name}, {b.price_usd_per_mmol:g} USD/mmol)" for b in hits[:limit]
        )
        more = f" (first {limit} of {len(hits)})" if len(hits) > limit else ""
        return (
            f"{len(hits)} building blocks{more}: {shown}" if hits else "no building block matches"
        )


def route_experiments(route: list[dict[str, Any]]) -> list[str]:
    """The construction route as JSON experiments (for tests and demonstrations)."""
    return [json.dumps({"reaction": s["reaction"], "reagents": s["reagents"]}) for s in route]
