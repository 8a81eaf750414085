"""MoleculeDesign-v2: the lab contract, rewards from measured values, hack guards,
hidden molecules no fixed list of drugs gives away, the impossible variant and seeding."""

from __future__ import annotations

import json

import numpy as np
import pytest
from rdkit import Chem
from rdkit.Chem import Descriptors, rdMolDescriptors

import labtwin
from labtwin.simulators.chem import parse_smiles
from labtwin.simulators.chem.descriptors import tanimoto
from labtwin.tasks.chem_design import (
    LIBRARY,
    REFERENCES,
    SIMILAR_MIN,
    TOLERANCES,
    WITNESSES,
    MoleculeDesign,
    criteria,
    desirability,
    engine,
    generated_molecules,
)
from labtwin.testing import check_lab

LAB = "MoleculeDesign-v2"
#: 12 drugs of LIBRARY and WITNESSES, in this order, that met the most MoleculeDesign-v0
#: profiles (greedy cover of seeds 0-99): proposed blind, by xTB, they met 96 of 100
FIXED_DRUGS = (
    "Cn1cnc2c1c(=O)[nH]c(=O)n2C",  # theobromine
    "CC(=O)Nc1ccc(OC(C)=O)cc1",  # diacetamate
    "CC(=O)Nc1ccc(cc1)S(N)(=O)=O",  # N-acetylsulfanilamide
    "CC(C)Cc1ccc(cc1)C(C)C(=O)OC",  # ibuprofen methyl ester
    "CC(C(=O)O)c1ccc(c(F)c1)-c1ccccc1",  # flurbiprofen
    "CC(C)(C)NCC(O)c1ccc(O)c(CO)c1",  # salbutamol
    "Cc1ccc(cc1)S(=O)(=O)NC(=O)NCCCC",  # tolbutamide
    "CCOc1ccc(NC(C)=O)cc1",  # phenacetin
    "COC(=O)c1ccccc1O",  # methyl salicylate
    "COc1ccc2cc(ccc2c1)C(C)C(=O)O",  # naproxen
    "OC(Cn1cncn1)(Cn1cncn1)c1ccc(F)cc1F",  # fluconazole
    "COCCc1ccc(OCC(O)CNC(C)C)cc1",  # metoprolol
)
#: 12 molecules chosen against this lab's generator: the greedy cover of 2,000 sampled
#: profiles (seeds 0-1999) over every generated molecule, the library and WITNESSES,
#: scored on descriptors (the gap criterion taken as met)
FIXED_AGAINST_THE_GENERATOR = (
    "CC(=O)Nc1ccc(N2CCCC2)cc1",
    "CC(=O)Nc1ccc(C(=O)Nc2ccc(N(C)C)cc2)cc1",
    "CCOc1ccccc1C(=O)O",
    "CC(=O)Nc1ccc(-c2ccc(S(N)(=O)=O)cc2)cc1",
    "CC(C(=O)O)c1ccc(-c2ccc(F)cc2)cc1",
    "CC(C)Cc1ccc(S(N)(=O)=O)cc1",
    "CC(C)Cc1ccc(OC(F)(F)F)cc1",
    "COc1ccccc1C(C)=O",
    "CCCn1c(=O)c2c(ncn2CC#N)n(C)c1=O",
    "CC(=O)Nc1ccc(-c2ccc(OC(F)(F)F)cc2)cc1",
    "NS(=O)(=O)c1ccc(-c2ccc(F)cc2)cc1",
    "CC(=O)Nc1ccc(CC(C)C)cc1",
)


@pytest.fixture(scope="module")
def lab() -> MoleculeDesign:
    return labtwin.load_task(LAB)


def test_keeps_the_labtwin_contract() -> None:
    assert check_lab(LAB, budget=3)[-1] == "calibration"


def test_same_seed_same_campaign_and_another_seed_another() -> None:
    def rollout(seed: int) -> list:
        env = labtwin.make(LAB)
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
    """Profiles are built around a hidden molecule: that molecule, measured by xTB, meets
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


def test_a_batch_of_resets_measures_its_hidden_molecules_together(lab) -> None:
    """Twelve campaigns starting together draw the profiles they would draw one by one,
    with one engine call per kind for their hidden molecules (the workers share the xTB
    runs) instead of one per campaign."""
    from labtwin.tasks import chem_design

    seeds = range(40, 52)
    alone = [lab.sample_conditions(np.random.default_rng(s)) for s in seeds]
    chem_design.engine().clear_cache()
    calls = []
    measure = chem_design.engine().measure

    def counted(smiles, kind):
        calls.append((len(smiles), kind))
        return measure(smiles, kind)

    chem_design.engine().measure = counted
    try:
        together = lab.sample_conditions_batch([np.random.default_rng(s) for s in seeds])
    finally:
        del chem_design.engine().measure
    assert together == alone
    gaps = sum(c["gap_required"] == 1.0 for c in alone)
    assert 0 < gaps < len(alone)
    assert sorted(calls, key=lambda c: c[1]) == [
        (len(alone) - gaps, "descriptors"),
        (gaps, "xtb"),
    ]


def success_rate(lab, seeds, picks) -> float:
    """Share of the campaigns of ``seeds`` in which one of ``picks`` (a function of the
    conditions giving SMILES), each measured by xTB, meets the whole profile."""
    wins = 0
    for seed in seeds:
        conditions = lab.sample_conditions(np.random.default_rng(seed))
        experiments = [{"smiles": s, "kind": "xtb"} for s in picks(conditions)]
        measured = lab.measure(experiments, conditions=conditions)
        wins += max(lab.score(m, conditions) for m in measured) >= 1.0
    return wins / len(seeds)


def test_hidden_molecules_are_generated_new_and_varied(lab) -> None:
    """The hidden molecules come from about 10,000 generated ones, none of them a library
    molecule (random search) or a reference (named to the agent); a similarity campaign's
    is an analogue of the reference, not the one closest to it (v0: the same molecule for
    every campaign with that reference)."""
    molecules = {parse_smiles(s).canonical for s in generated_molecules()}
    assert len(molecules) > 10_000
    library = {parse_smiles(s).canonical for s in (*LIBRARY, *WITNESSES)}
    hidden, analogues = [], {}
    for seed in range(40):
        conditions = lab.sample_conditions(np.random.default_rng(seed))
        witness = conditions["witness"]
        assert witness in molecules and witness not in library
        hidden.append(witness)
        if conditions["similarity_min"] > 0:
            reference = Chem.MolFromSmiles(conditions["reference_smiles"])
            similarity = tanimoto(Chem.MolFromSmiles(witness), reference)
            assert similarity >= SIMILAR_MIN and conditions["similarity_min"] <= similarity
            analogues.setdefault(conditions["reference"], set()).add(witness)
    assert len(set(hidden)) == len(hidden)  # 40 campaigns, 40 hidden molecules
    assert max(len(found) for found in analogues.values()) >= 2


def test_a_fixed_list_of_drugs_meets_few_profiles(lab) -> None:
    """No reasoning about the profile: 12 fixed molecules, measured by xTB, in 40 campaigns.
    v0 built every profile around one of 18 public drugs (WITNESSES), so the 12 that met
    the most v0 profiles met 96 of 100 of them, and one guess, the drug closest to the
    named reference, met every similarity profile (39 of 100 campaigns in all); random
    search over the library met 5 of 32. Now the drugs meet 7 of 40 (15 of 100), the guess
    and the reference none, and a list chosen against the generator itself 14 of 40 (34 of
    100): reading the profile is what succeeds."""
    seeds = range(40)
    assert success_rate(lab, seeds, lambda c: FIXED_DRUGS) <= 0.25
    assert success_rate(lab, seeds, lambda c: FIXED_AGAINST_THE_GENERATOR) <= 0.5
    closest = {
        smiles: max(WITNESSES, key=lambda w: tanimoto(Chem.MolFromSmiles(w), reference))
        for _, smiles in REFERENCES
        for reference in [Chem.MolFromSmiles(smiles)]
    }
    assert success_rate(lab, seeds, lambda c: [closest[c["reference_smiles"]]]) <= 0.05
    assert success_rate(lab, seeds, lambda c: [c["reference_smiles"]]) <= 0.05


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
        ("[CH3:7]C(=O)Nc1ccc(O)cc1", "atom maps"),
        ("C[C+](C)CC[C-](C)C", "a carbanion, a carbocation"),  # neutral overall
        ("C[C+](C)c1ccc(cc1)C(=O)[O-]", "a carbocation"),
        ("CC[B-](C)(C)[NH3+]", "a charged B atom"),
    ],
)
def test_hack_molecules_are_invalid_with_the_reason(lab, smiles: str, reason: str) -> None:
    bad, good = lab.measure([{"smiles": smiles}, {"smiles": "CCO"}])
    assert bad.status == "invalid" and reason in bad.reason and bad.cost == 0.0
    assert good.ok


def test_atom_maps_give_no_fresh_draws_of_one_molecule(lab) -> None:
    """An atom map changes the canonical SMILES, so the engine embeds the atoms in another
    order: 8 labellings of metoprolol gave xTB gaps of 3.47-3.99 eV (3.99 unlabelled), more
    than the 0.25 eV tolerance of a gap window, and 11 labellings of each library molecule
    turned one more of 96 gap campaigns into a success. Labelled spellings are invalid."""
    metoprolol = "COCCc1ccc(OCC(O)CNC(C)C)cc1"
    labelled = ["COCCc1ccc(OCC(O)CNC(C)[CH3:5])cc1", "[CH3:1]OCCc1ccc(OCC(O)CNC(C)C)cc1"]
    plain, *measured = lab.measure([{"smiles": s, "kind": "xtb"} for s in [metoprolol, *labelled]])
    assert plain.ok
    assert all(m.status == "invalid" and "atom maps" in m.reason for m in measured)


@pytest.mark.parametrize(
    ("smiles", "alert"),
    [
        ("NNNNNNC(=O)O", "a chain of 6 heteroatoms"),
        ("CC(C)OOC(C)C", "a peroxide"),
        ("OC1C2C3C1C23O", "two three-membered rings"),
        ("Cc1ccc(cc1)-n1nnnn1", "a ring of five or more nitrogen atoms"),
        ("CS(C)(CC)CCO", "a hypervalent S atom"),
        ("CCP(C)(C)(C)CO", "a hypervalent P atom"),
        ("CC(=O)OI(OC(C)=O)c1ccccc1", "a hypervalent I atom"),
    ],
)
def test_structural_alerts_score_zero_and_the_notes_say_why(lab, smiles: str, alert: str) -> None:
    conditions = lab.nominal_conditions()
    (m,) = lab.measure([{"smiles": smiles}], conditions=conditions)
    assert m.ok and m["structural_alerts"] >= 1
    assert any(alert in note for note in m.notes) and alert in m.describe()
    assert lab.score(m, conditions) == 0.0


def test_safe_heteroatom_groups_raise_no_alert(lab) -> None:
    """Aromatic N-N-N rings, nitro groups, azides, zwitterions, isonitriles, sulfones,
    sulfoximines, SF5 groups and phosphine oxides are chemistry, not hacks."""
    safe = ["c1nn[nH]n1", "C[N+](=O)[O-]", "CN=[N+]=[N-]", "NC(=O)NN", "c1cnnnn1"]
    safe += ["C[N+](C)(C)CC(=O)[O-]", "[C-]#[N+]c1ccccc1", "CS(=O)(=O)c1ccccc1"]
    safe += ["CS(=N)(=O)c1ccccc1", "FS(F)(F)(F)(F)c1ccccc1", "CP(C)(C)=O", "C[S+](C)CC(=O)[O-]"]
    for smiles in safe:
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
    env = labtwin.make(LAB, impossible=True)
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

    env = labtwin.make(LAB, budget=4)
    agent = RandomSearch()
    agent.reset(env.action_space, seed=0, task=env.unwrapped.task)
    env.reset(seed=0)
    rewards = [env.step(agent.propose())[1] for _ in range(4)]
    assert env.unwrapped.campaign.done and sum(rewards) > 0.0


@pytest.mark.slow
def test_random_search_reference_score() -> None:
    """Random search over the library at the default budget (12): 1 of 32 campaigns
    succeeded when this was written, mean best score 0.69 (v0, whose profiles were built
    around 18 drugs: 5 of 32, 0.80); on the impossible variant none (mean best 0.47). Bands
    wide enough for a change of library or RDKit version, narrow enough to notice a lab that
    became trivial (random molecules meeting the profiles) or far off (best scores falling)."""
    from labtwin.agents.baselines import RandomSearch

    for impossible, (low, high), (least, most) in (
        (False, (0, 6), (0.6, 0.8)),
        (True, (0, 0), (0.35, 0.6)),
    ):
        task = MoleculeDesign(impossible=impossible)
        successes, best = 0, []
        for seed in range(32):
            env = labtwin.make(LAB, impossible=impossible)
            agent = RandomSearch()
            agent.reset(env.action_space, seed=seed, task=task)
            env.reset(seed=seed)
            done = False
            while not done:
                *_, terminated, truncated, _ = env.step(agent.propose())
                done = terminated or truncated
            campaign = env.unwrapped.campaign
            successes += task.success(campaign.history, campaign.conditions)
            best.append(campaign.best_score)
        assert low <= successes <= high, (impossible, successes)
        assert least < np.mean(best) < most, (impossible, np.mean(best))


def test_the_cost_budget_makes_xtb_readings_a_decision() -> None:
    """12 experiments and 2 CPU-s: twelve descriptor readings (0.12 CPU-s) use every
    experiment; xTB readings of a 40-atom molecule (0.41 CPU-s each) end the campaign at
    the fifth, which crosses the cost budget and is paid in full. Before v2 an xTB reading
    cost nothing a descriptors reading did not."""
    propranolol = "CC(C)NCC(O)COc1cccc2ccccc12"  # 40 atoms with hydrogens
    steps = {}
    for kind in ("descriptors", "xtb"):
        env = labtwin.make(LAB)
        env.reset(seed=0)
        done, n = False, 0
        while not done:
            *_, terminated, truncated, _ = env.step(
                json.dumps({"smiles": propranolol, "kind": kind})
            )
            done, n = terminated or truncated, n + 1
        campaign = env.unwrapped.campaign
        steps[kind] = (n, campaign.end_reason, round(campaign.cost, 2))
    assert steps["descriptors"] == (12, "budget spent", 0.12)
    assert steps["xtb"] == (5, "cost budget spent", 2.05)
    unlimited = labtwin.make(LAB, cost_budget=None)
    unlimited.reset(seed=0)
    for _ in range(6):
        *_, terminated, _, _ = unlimited.step(json.dumps({"smiles": propranolol, "kind": "xtb"}))
        assert not terminated


def test_labtwin_run_summarises_campaigns_that_end_on_their_cost_budget(tmp_path) -> None:
    """With 0.3 CPU-s, a random campaign ends at its first xTB reading or soon after, before
    its 12 experiments. The runner used to step every slot 12 times, resetting an ended
    campaign into a new one that was run and recorded but not summarised (and summarising
    the new one, empty, raised): each campaign is now summarised once, as it ended."""
    from labtwin.runner import run_campaigns

    summaries, path = run_campaigns(
        LAB, "random", n_campaigns=3, run_dir=tmp_path, progress=False, cost_budget=0.3
    )
    run = labtwin.runs.load(path)
    assert [s.campaign for s in summaries] == [0, 1, 2]
    assert {r.campaign for r in run.records} == {0, 1, 2}
    assert any(s.experiments < 12 for s in summaries)
    assert all(
        len([r for r in run.records if r.campaign == s.campaign]) == s.experiments
        for s in summaries
    )
