"""MoleculeDesign-v0: the lab contract, rewards from measured values, hack guards,
the impossible variant and seeding."""

from __future__ import annotations

import json

import numpy as np
import pytest
from rdkit import Chem
from rdkit.Chem import Descriptors, rdMolDescriptors

import labtwin
from labtwin.tasks.chem_design import (
    LIBRARY,
    TOLERANCES,
    MoleculeDesign,
    criteria,
    desirability,
    engine,
)
from labtwin.testing import check_lab


@pytest.fixture(scope="module")
def lab() -> MoleculeDesign:
    return labtwin.load_task("MoleculeDesign-v0")


def test_keeps_the_labtwin_contract() -> None:
    assert check_lab("MoleculeDesign-v0", budget=3)[-1] == "calibration"


def test_same_seed_same_campaign_and_another_seed_another() -> None:
    def rollout(seed: int) -> list:
        env = labtwin.make("MoleculeDesign-v0")
        obs, _ = env.reset(seed=seed)
        steps = [obs.tolist()]
        for smiles, kind in [("CC(=O)Nc1ccc(O)cc1", "xtb"), ("OCC(O)CO", "descriptors")]:
            obs, reward, *_, info = env.step(json.dumps({"smiles": smiles, "kind": kind}))
            steps.append((obs.tolist(), reward, info["measurement"].to_dict()))
        return steps

    a, b, c = rollout(5), rollout(5), rollout(6)
    assert a == b
    assert a[0] != c[0]  # another profile


def test_measured_values_are_the_engines_and_the_score_reads_only_them(lab) -> None:
    conditions = lab.sample_conditions(np.random.default_rng(0))
    (m,) = lab.measure([{"smiles": "CC(=O)Nc1ccc(O)cc1", "kind": "xtb"}], conditions=conditions)
    (result,) = engine().measure(["CC(=O)Nc1ccc(O)cc1"], "xtb")
    assert m.ok and all(m[name] == value for name, value in result.values.items())
    assert all(v.uncertainty == 0.0 for v in m.observables.values())  # no noise, no error bar
    expected = np.mean(
        [
            desirability(m[name], low, high, TOLERANCES[name])
            for name, low, high in criteria(conditions)
        ]
    )
    assert lab.score(m, conditions) == pytest.approx(expected, rel=1e-15)
    assert m.cost == pytest.approx(0.01 + 0.01 * result.n_atoms)
    (cheap,) = lab.measure([{"smiles": "CC(=O)Nc1ccc(O)cc1"}], conditions=conditions)
    assert cheap.cost == 0.01 < m.cost and cheap["xtb_measured"] == 0.0


def test_every_profile_is_met_by_its_hidden_molecule(lab) -> None:
    """Profiles are built around a library molecule: that molecule, measured by xTB, meets
    every criterion (score 1, a success); a gap window is not met by descriptors alone."""
    found_gap = found_similarity = False
    for seed in range(12):
        conditions = lab.sample_conditions(np.random.default_rng(seed))
        (m,) = lab.measure(
            [{"smiles": conditions["witness"], "kind": "xtb"}], conditions=conditions
        )
        assert lab.score(m, conditions) == 1.0, (seed, conditions)
        found_similarity |= conditions["similarity_min"] > 0
        if conditions["gap_required"]:
            found_gap = True
            (cheap,) = lab.measure([{"smiles": conditions["witness"]}], conditions=conditions)
            assert lab.score(cheap, conditions) < 1.0
    assert found_gap and found_similarity


@pytest.mark.parametrize(
    ("smiles", "reason"),
    [
        ("CCO.CCO", "2 disconnected fragments"),
        ("CC[Sn](C)C", "element(s) Sn not allowed"),
        ("[2H]OC", "isotope labels"),
        ("C[CH2]", "radical electron"),
        ("CC(=O)[O-]", "net charge -1"),
        ("C1CC", "unclosed ring"),
        ("C" * 70, "70 heavy atoms"),
    ],
)
def test_hack_molecules_are_invalid_with_the_reason(lab, smiles: str, reason: str) -> None:
    bad, good = lab.measure([{"smiles": smiles}, {"smiles": "CCO"}])
    assert bad.status == "invalid" and reason in bad.reason and bad.cost == 0.0
    assert good.ok


@pytest.mark.parametrize(
    ("smiles", "alert"),
    [
        ("NNNNNNC(=O)O", "a chain of 6 heteroatoms"),
        ("CC(C)OOC(C)C", "a peroxide"),
        ("OC1C2C3C1C23O", "two three-membered rings"),
    ],
)
def test_structural_alerts_score_zero_and_the_notes_say_why(lab, smiles: str, alert: str) -> None:
    conditions = lab.nominal_conditions()
    (m,) = lab.measure([{"smiles": smiles}], conditions=conditions)
    assert m.ok and m["structural_alerts"] >= 1
    assert any(alert in note for note in m.notes) and alert in m.describe()
    assert lab.score(m, conditions) == 0.0


def test_safe_heteroatom_groups_raise_no_alert(lab) -> None:
    """Aromatic N-N-N rings, nitro groups and azides are chemistry, not hacks."""
    for smiles in ["c1nn[nH]n1", "C[N+](=O)[O-]", "CN=[N+]=[N-]", "NC(=O)NN"]:
        (m,) = lab.measure([{"smiles": smiles}])
        assert m.ok and m["structural_alerts"] == 0, (smiles, m.notes)


def test_impossible_profile_cannot_be_met() -> None:
    """MW <= 120 g/mol with TPSA >= 300 A^2: TPSA per gram is at most 27.64 / 14.007 A^2 mol/g
    (module docs). Polar small molecules, the library and random search stay far below."""
    task = MoleculeDesign(impossible=True)
    polar = ["NC(N)=O", "NC(=N)N", "NC(=O)C(N)=O", "OC(O)C(O)O", "NC#N", "N#CC#N", "NCN", "OCO"]
    for smiles in polar + list(LIBRARY):
        mol = Chem.MolFromSmiles(smiles)
        tpsa_per_mass = rdMolDescriptors.CalcTPSA(mol) / Descriptors.MolWt(mol)
        assert tpsa_per_mass <= 27.64 / 14.007 + 1e-12, smiles
    env = labtwin.make("MoleculeDesign-v0", impossible=True)
    rng = np.random.default_rng(0)
    for seed in range(3):
        env.reset(seed=seed)
        for _ in range(4):
            env.step(json.dumps(task.random_experiment(rng).model_dump()))
        campaign = env.unwrapped.campaign
        assert not task.success(campaign.history, campaign.conditions)
        assert campaign.best_score < 1.0


def test_random_search_runs_the_text_lab() -> None:
    from labtwin.agents.baselines import RandomSearch

    env = labtwin.make("MoleculeDesign-v0", budget=4)
    agent = RandomSearch()
    agent.reset(env.action_space, seed=0, task=env.unwrapped.task)
    env.reset(seed=0)
    rewards = [env.step(agent.propose())[1] for _ in range(4)]
    assert env.unwrapped.campaign.done and sum(rewards) > 0.0


@pytest.mark.slow
def test_random_search_reference_score() -> None:
    """Random search over the library at the default budget (12): 5 of 32 campaigns
    succeeded when this was written, mean best score 0.80; on the impossible variant none
    (mean best 0.55). Bands wide enough for a change of library or RDKit version, narrow
    enough to notice a lab that became trivial or unreachable."""
    from labtwin.agents.baselines import RandomSearch

    for impossible, (low, high) in ((False, (1, 16)), (True, (0, 0))):
        task = MoleculeDesign(impossible=impossible)
        successes = 0
        for seed in range(32):
            env = labtwin.make("MoleculeDesign-v0", impossible=impossible)
            agent = RandomSearch()
            agent.reset(env.action_space, seed=seed, task=task)
            env.reset(seed=seed)
            done = False
            while not done:
                *_, terminated, truncated, _ = env.step(agent.propose())
                done = terminated or truncated
            campaign = env.unwrapped.campaign
            successes += task.success(campaign.history, campaign.conditions)
        assert low <= successes <= high, (impossible, successes)
