"""MoleculeLibrary-v3: the numeric view of a molecule library, its map to library molecules,
numeric and text views giving the same campaign, profiles built around any library molecule
and met by it alone, and a baseline through the view."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from rdkit import Chem
from rdkit.Chem import Descriptors

import labtwin
from labtwin.runner import run_campaigns
from labtwin.simulators.chem.descriptors import tanimoto
from labtwin.tasks.chem_design import LIBRARY, SIMILAR_MIN, WITNESSES, MoleculeDesign
from labtwin.tasks.chem_library import LIBRARY_SMILES, MoleculeLibrary

LAB = "MoleculeLibrary-v3"


@pytest.fixture(scope="module")
def lab() -> MoleculeLibrary:
    return labtwin.load_task(LAB)


#: the 12 library molecules that met the most MoleculeLibrary-v0 profiles (seeds 0-99)
FIXED_PICKS = frozenset(
    {
        *("Cn1cnc2c1c(=O)[nH]c(=O)n2C", "CC(=O)Nc1ccc(OC(C)=O)cc1", "COC(=O)c1ccccc1O"),
        *("CC(=O)Nc1ccc(cc1)S(N)(=O)=O", "CC(C)Cc1ccc(cc1)C(C)C(=O)OC", "CCOc1ccc(NC(C)=O)cc1"),
        *("CC(C(=O)O)c1ccc(c(F)c1)-c1ccccc1", "CC(C)(C)NCC(O)c1ccc(O)c(CO)c1"),
        *("Cc1ccc(cc1)S(=O)(=O)NC(=O)NCCCC", "COc1ccc2cc(ccc2c1)C(C)C(=O)O"),
        *("OC(Cn1cncn1)(Cn1cncn1)c1ccc(F)cc1F", "COCCc1ccc(OCC(O)CNC(C)C)cc1"),
    }
)


def bin_centre(index: int, n: int) -> float:
    """The point of [-1, 1] in the middle of bin ``index`` of ``n`` equal bins."""
    return -1.0 + (2 * index + 1) / n


def test_the_view_is_a_box_of_a_molecule_axis_and_a_kind_axis(lab) -> None:
    view = lab.numeric_view
    assert view.names == ["smiles", "kind"]
    assert view.space.shape == (2,) and view.space.low.min() == -1 and view.space.high.max() == 1
    assert lab.action_space == view.space
    # the library: every MoleculeDesign library molecule and every named drug, once each
    assert len(LIBRARY_SMILES) == len(set(LIBRARY) | set(WITNESSES)) == 38
    assert set(LIBRARY_SMILES) == set(LIBRARY) | set(WITNESSES)
    assert all(Chem.MolFromSmiles(s) is not None for s in LIBRARY_SMILES)


def test_an_action_maps_to_the_library_molecule_in_its_bin(lab) -> None:
    view = lab.numeric_view
    n = len(LIBRARY_SMILES)
    for i, smiles in enumerate(LIBRARY_SMILES):
        for kind_u, kind in ((-0.5, "descriptors"), (0.5, "xtb")):
            experiment = view.to_experiment(np.array([bin_centre(i, n), kind_u]))
            assert (experiment.smiles, experiment.kind) == (smiles, kind)
            assert np.allclose(view.to_vector(experiment), [bin_centre(i, n), kind_u])
    assert view.to_experiment(np.array([-1.0, -1.0])).smiles == LIBRARY_SMILES[0]
    assert view.to_experiment(np.array([1.0, 1.0])).smiles == LIBRARY_SMILES[-1]
    # out of the box: invalid with the reason, like any numeric lab
    (m,) = lab.measure([np.array([1.5, 0.0])])
    assert m.status == "invalid" and "outside [-1, 1]" in m.reason


def test_the_measurement_is_of_the_chosen_molecule(lab) -> None:
    i = LIBRARY_SMILES.index("CC(=O)Nc1ccc(O)cc1")  # paracetamol
    action = np.array([bin_centre(i, len(LIBRARY_SMILES)), -0.5], dtype=np.float32)
    (m,) = lab.measure([action], seed=0)
    assert m.ok, m.reason
    mol = Chem.MolFromSmiles("CC(=O)Nc1ccc(O)cc1")
    assert m.provenance["canonical_smiles"] == Chem.MolToSmiles(mol)
    assert m["molecular_weight"] == pytest.approx(Descriptors.MolWt(mol), rel=1e-12)
    assert m["xtb_measured"] == 0.0


def test_a_smiles_outside_the_library_is_invalid_with_the_reason(lab) -> None:
    (m,) = lab.measure([{"smiles": "CCO", "kind": "descriptors"}])
    assert m.status == "invalid"
    assert m.reason.startswith("smiles: Input should be 'CC(=O)Oc1ccccc1C(=O)O'")


def test_the_same_seed_gives_the_same_campaign_in_the_numeric_and_the_text_view(lab) -> None:
    rng = np.random.default_rng(3)
    actions = rng.uniform(-1, 1, (4, 2)).astype(np.float32)
    actions[1, 1] = 0.7  # one xtb experiment among them
    numeric = labtwin.make(LAB)
    text = labtwin.make(LAB, action_view="text")
    obs_n, info_n = numeric.reset(seed=11)
    obs_t, info_t = text.reset(seed=11)
    assert np.array_equal(obs_n, obs_t) and info_n == info_t
    view = lab.numeric_view
    for action in actions:
        proposal = json.dumps(view.to_experiment(action).model_dump())
        obs_n, reward_n, done_n, _, info_n = numeric.step(action)
        obs_t, reward_t, done_t, _, info_t = text.step(proposal)
        assert np.array_equal(obs_n, obs_t)
        assert (reward_n, done_n) == (reward_t, done_t)
        m_n, m_t = info_n["measurement"], info_t["measurement"]
        assert m_n.ok and m_n.experiment == m_t.experiment
        assert {k: v.value for k, v in m_n.observables.items()} == {
            k: v.value for k, v in m_t.observables.items()
        }
    # and the profile is drawn as MoleculeDesign's is (the same reference and criteria from
    # the same seed), around a library molecule
    design = labtwin.make("MoleculeDesign-v2")
    design.reset(seed=11)
    ours, theirs = numeric.unwrapped.campaign.conditions, design.unwrapped.campaign.conditions
    for name in ("reference_index", "gap_required"):
        assert ours[name] == theirs[name]
    assert (ours["similarity_min"] > 0) == (theirs["similarity_min"] > 0)
    assert ours["witness"] in LIBRARY_SMILES and isinstance(lab, MoleculeDesign)


def separable(a: float, b: float, step: float) -> bool:
    """Whether a bound rounded to ``step`` fits strictly between ``a`` and ``b``."""
    low, high = sorted((a, b))
    return any(
        low < k * step < high for k in range(math.floor(low / step), math.ceil(high / step) + 1)
    )


def test_profiles_are_built_around_any_library_molecule_that_meets_them(lab) -> None:
    """v0 built every profile around one of the last 18 molecules (WITNESSES), and a
    similarity profile around the one closest to the reference, so 12 fixed picks met 96 of
    100 profiles (random picks about 4 in 10). Since v1 any library molecule but the
    reference may be the hidden one, a similarity campaign's any analogue at least
    SIMILAR_MIN similar to the reference, and it meets its profile. Since v3 the profile is
    narrowed until no other library molecule meets it, unless one has the same values on
    every criterion to the profile's rounding (isomers with the same descriptors:
    theobromine and theophylline, methyl salicylate and methylparaben), so the same 12
    picks meet 19 of 40 (v2: 26, v0: 39)."""
    found, analogues = set(), {}
    # each criterion's rounding step in the profile
    criteria = {"logp": 0.1, "molecular_weight": 10.0, "tpsa": 1.0, "qed": 0.01, "xtb_gap": 0.01}
    wins = 0
    fixed = [s for s in LIBRARY_SMILES if s in FIXED_PICKS]
    for seed in range(40):
        conditions = lab.sample_conditions(np.random.default_rng(seed))
        witness = conditions["witness"]
        assert witness in LIBRARY_SMILES and witness != conditions["reference_smiles"]
        found.add(witness)
        if conditions["similarity_min"] > 0:
            reference = Chem.MolFromSmiles(conditions["reference_smiles"])
            assert tanimoto(Chem.MolFromSmiles(witness), reference) >= SIMILAR_MIN
            analogues.setdefault(conditions["reference"], set()).add(witness)
        every = [{"smiles": s, "kind": "xtb"} for s in LIBRARY_SMILES]
        values = dict(zip(LIBRARY_SMILES, lab.measure(every, conditions=conditions)))
        scores = {s: lab.score(m, conditions) for s, m in values.items()}
        assert scores[witness] == 1.0, (seed, conditions)
        for other in (s for s, score in scores.items() if score >= 1.0 and s != witness):
            apart = [
                separable(values[other][c], values[witness][c], step)
                for c, step in criteria.items()
                if c != "xtb_gap" or conditions["gap_required"]
            ]
            assert not any(apart), (seed, other, "meets a profile built around", witness)
        wins += any(scores[s] >= 1.0 for s in fixed)
    assert found & set(LIBRARY) and found & set(WITNESSES)
    assert max(len(a) for a in analogues.values()) >= 2
    assert wins <= 22, wins


@pytest.mark.parametrize("agent", ["random", "cmaes"])
def test_a_baseline_runs_campaigns_through_the_numeric_view(agent: str, lab, tmp_path) -> None:
    summaries, path = run_campaigns(
        LAB, agent, n_campaigns=1, seed=0, run_dir=tmp_path, progress=False, budget=4
    )
    run = labtwin.runs.load(path)
    assert len(run.records) == 4 and 0.0 <= summaries[0].best_score <= 1.0
    assert all(r.proposal["smiles"] in LIBRARY_SMILES for r in run.records)
    assert run.rescore(lab) == [r.score for r in run.records]


@pytest.mark.slow
def test_baseline_reference_scores(tmp_path) -> None:
    """The lab's reference figures (docs/chemistry.md): campaigns 0-7 at the default budget
    of 12; the lab is deterministic and the agents seeded, so these are exact for this code
    (measured: random 0.9202 with 4 of 8 campaigns at a best score of 1, CMA-ES 0.8903 with 4,
    BO 0.7699 with none; v2, whose profiles other library molecules could meet too: 0.9202,
    0.8903 and 0.7841 with 4, 4 and 1; v1, with no cost budget: 0.9202, 0.9110, 0.7923; v0,
    whose profiles were built around the last 18 molecules only: 0.9271 with 4, 0.9212 with
    4, 0.8618 with 5). The margins allow the agents' libraries (CMA-ES, Optuna) to change
    their draws between versions."""
    means, perfect = {}, {}
    for agent in ("random", "cmaes", "bo"):
        summaries, _ = run_campaigns(
            LAB, agent, n_campaigns=8, run_dir=tmp_path / agent, progress=False
        )
        means[agent] = float(np.mean([s.best_score for s in summaries]))
        perfect[agent] = sum(s.best_score >= 1.0 for s in summaries)
    assert all(0.7 < m < 1.0 for m in means.values()), means
    assert perfect["random"] >= 1 and perfect["cmaes"] >= 1, perfect
    assert all(n <= 7 for n in perfect.values()), perfect
