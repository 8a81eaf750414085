"""GFN2-xTB reaction energies against tblite's Calculator run here, their sign, the element
balance, the templates' by-products and bad input."""

from __future__ import annotations

import numpy as np
import pytest
from rdkit import Chem
from scipy import constants

from labtwin.simulators.chem import (
    BY_PRODUCTS,
    TEMPLATES,
    MoleculeEngine,
    balance_template,
    parse_smiles,
    run_reaction,
)
from labtwin.simulators.chem.conformers import conformer_ensemble
from labtwin.simulators.chem.reaction_energy import KJ_PER_MOL_PER_HARTREE

DIELS_ALDER = (["C=CC=C", "C=C"], ["C1=CCCCC1"])  # butadiene + ethene -> cyclohexene
#: the engine's workers run tblite on one thread, this process perhaps on several: the SCF
#: sums in another order differ at round-off, far below tblite's convergence threshold
ENERGY_TOLERANCE_EH = 1e-9
#: one stock reaction per template (what SynthesisPlanning-v1's stock offers)
EXAMPLES = {
    "amide_coupling": ["CC(=O)O", "CCN"],
    "esterification": ["CC(=O)O", "CCO"],
    "suzuki_coupling": ["Brc1ccccc1", "OB(O)c1ccccc1"],
    "reductive_amination": ["CC=O", "CCN"],
    "snar": ["Fc1ccccn1", "C1CCNCC1"],
    "boc_deprotection": ["CC(C)(C)OC(=O)NCC"],
    "sulfonamide_formation": ["CS(=O)(=O)Cl", "CCN"],
    "ester_hydrolysis": ["CC(=O)OCC"],
}


@pytest.fixture(scope="module")
def engine():
    e = MoleculeEngine(n_workers=1)
    yield e
    e.close()


def tblite_energy(smiles: str) -> float:
    """GFN2-xTB energy [Eh] of the lowest MMFF94 conformer, with tblite called here."""
    from tblite.interface import Calculator

    ensemble = conformer_ensemble(Chem.MolFromSmiles(smiles))
    bohr = ensemble.positions_angstrom / constants.physical_constants["Bohr radius"][0] * 1e-10
    calc = Calculator("GFN2-xTB", ensemble.atomic_numbers.astype(np.int32), bohr)
    calc.set("verbosity", 0)
    calc.set("temperature", 300.0 * constants.k / constants.physical_constants["Hartree energy"][0])
    return float(calc.singlepoint().get("energy"))


def test_equals_the_difference_of_tblite_energies_computed_directly(engine) -> None:
    reagents, products = DIELS_ALDER
    result = engine.reaction_energy(reagents, products)
    assert result.ok, result.reason
    direct = sum(map(tblite_energy, products)) - sum(map(tblite_energy, reagents))
    assert result.delta_hartree == pytest.approx(direct, abs=ENERGY_TOLERANCE_EH)
    # kJ/mol from CODATA's Hartree energy and Avogadro constant, written out here
    per_mol = constants.physical_constants["Hartree energy"][0] * constants.N_A / 1e3
    assert KJ_PER_MOL_PER_HARTREE == pytest.approx(per_mol, rel=1e-12)
    assert result.delta_kj_mol == pytest.approx(direct * per_mol, abs=1e-5)
    # the molecule energies are the lab's own xtb measurement of each molecule, cached
    computed = engine.computed
    for smiles, energy in result.energies_hartree.items():
        (measured,) = engine.measure([smiles], "xtb")
        assert measured.values["xtb_energy"] == energy
    assert engine.computed == computed


def test_diels_alder_is_exothermic_and_the_reverse_reaction_endothermic(engine) -> None:
    # butadiene + ethene -> cyclohexene: Delta_r H = -167 kJ/mol (gas-phase heats of formation, NIST
    # thermochemistry); GFN2-xTB on MMFF94 geometries gives -282 kJ/mol here: the sign and
    # the size (over 100 kJ/mol) are what the method gets right
    reagents, products = DIELS_ALDER
    forward = engine.reaction_energy(reagents, products)
    assert forward.delta_kj_mol < -100.0
    backward = engine.reaction_energy(products, reagents)
    assert backward.delta_hartree == -forward.delta_hartree


def test_a_molecule_listed_twice_counts_twice(engine) -> None:
    # 2 ethene -> cyclobutane (exothermic: Delta_r H = -77 kJ/mol, NIST)
    result = engine.reaction_energy(["C=C", "C=C"], ["C1CCC1"])
    assert result.ok, result.reason
    e = result.energies_hartree
    assert result.delta_hartree == pytest.approx(e["C1CCC1"] - 2 * e["C=C"], abs=1e-12)
    assert result.delta_kj_mol < 0


def test_unbalanced_sides_are_refused_with_the_missing_atoms(engine) -> None:
    computed = engine.computed
    result = engine.reaction_energy(["CC(=O)O", "CN"], ["CNC(C)=O"])  # water left out
    assert result.status == "invalid"
    assert "the products lack H2O" in result.reason
    assert "C3H9NO2" in result.reason and "C3H7NO" in result.reason
    assert engine.computed == computed  # refused before anything is measured
    result = engine.reaction_energy(["C=C"], ["CC"])  # hydrogen left out
    assert "have H2 too many" in result.reason


@pytest.mark.parametrize(
    ("reagents", "products", "message"),
    [
        (["C1CC", "C=C"], ["C1CCCC1"], "reagent 1: invalid SMILES 'C1CC': unclosed ring"),
        (["C=C"], ["C(C)(C)(C)(C)C"], "product 1: invalid SMILES"),
        (["C=C"], ["CC.C"], "disconnected fragments"),
        ("C=C", ["C=C"], "reagents must be a list of SMILES"),
        ([], ["C=C"], "no reagents"),
        (["C=C"], [None], "a SMILES must be a string"),
    ],
)
def test_bad_input_is_refused_with_the_reason(engine, reagents, products, message) -> None:
    result = engine.reaction_energy(reagents, products)
    assert result.status == "invalid"
    assert message in result.reason


def test_a_molecule_mmff_cannot_type_fails_the_reaction_with_its_reason(engine) -> None:
    result = engine.reaction_energy(["C=C", "[H][H]"], ["CC"])
    assert result.status == "failed"
    assert result.reason.startswith("reagent [H][H]: conformers: MMFF94 has no parameters")


def test_every_template_balances_with_its_by_products() -> None:
    assert set(BY_PRODUCTS) == set(TEMPLATES) == set(EXAMPLES)
    for name, reagents in EXAMPLES.items():
        outcome = run_reaction(name, [parse_smiles(s).mol for s in reagents])
        assert outcome.ok, outcome.reason
        balanced = balance_template(name, reagents, [outcome.major.smiles])
        assert balanced is not None, name
        left, right = balanced
        assert left[: len(reagents)] == reagents and right[0] == outcome.major.smiles
    # the leaving group follows the substrate: ethyl ester -> ethanol, aryl chloride -> HCl
    _, right = balance_template("ester_hydrolysis", ["CC(=O)OCC"], ["CC(=O)O"])
    assert right == ["CC(=O)O", "CCO"]
    _, right = balance_template("snar", ["Clc1ccccn1", "C1CCNCC1"], ["c1ccc(N2CCCCC2)nc1"])
    assert right == ["c1ccc(N2CCCCC2)nc1", "Cl"]
    assert balance_template("amide_coupling", ["CC(=O)O", "CCN"], ["CC"]) is None


def test_an_amide_coupling_balanced_by_its_template_is_measured(engine) -> None:
    reagents = EXAMPLES["amide_coupling"]
    outcome = run_reaction("amide_coupling", [parse_smiles(s).mol for s in reagents])
    left, right = balance_template("amide_coupling", reagents, [outcome.major.smiles])
    result = engine.reaction_energy(left, right)
    assert result.ok, result.reason
    assert set(result.energies_hartree) == {"CC(=O)O", "CCN", "CCNC(C)=O", "O"}
