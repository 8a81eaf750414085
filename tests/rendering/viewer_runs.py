"""Runs for the viewer's tests and docs, written through the real run store.

- :func:`campaign_run`: campaigns of a real lab (LJClusterAnneal-v0) by two agents;
- :func:`chat_run`: a GRPO-like training run: tool-calling campaigns through
  ``ChatLabEnv`` (scripted replies, one with ``<script>`` in it), their transcripts as
  the trainer logs them, and the metrics ``agents/train.py`` logs;
- :func:`structures_run`: records whose measurements carry a molecule (RDKit conformer,
  aromatic bonds) and a crystal (ASE fcc cell, a relaxation trajectory).

Where a lab does not yet record ``structure_*`` artifacts, :class:`WithStructures`
adds them from the lab's own ``positions`` (and ``cell``/``atomic_numbers``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import labtwin
from labtwin.campaign import Campaign, CampaignBatch, Record
from labtwin.measurement import Measurement, Value
from labtwin.runs import RunStore
from labtwin.structures import has_structure, structure_artifacts
from labtwin.tools import PROPOSE, ChatLabEnv, format_tool_call

LAB = "LJClusterAnneal-v0"
SCRIPT_REPLY = "<script>window.__pwned = 1</script> I try a slow anneal."


class WithStructures:
    """A recorder in front of the run store: structure artifacts from a lab's ``positions``
    where the lab does not record them itself (an LJ cluster: pseudo-atoms; frames from
    the relaxation towards the final positions, so that playback has something to show)."""

    def __init__(self, store: RunStore) -> None:
        self.store = store

    def campaign_started(self, campaign: Campaign) -> None:
        self.store.campaign_started(campaign)

    def record(self, record: Record) -> None:
        a = record.measurement.artifacts
        if not has_structure(a) and "positions" in a:
            final = np.asarray(a["positions"], dtype=float).reshape(-1, 3)
            numbers = np.asarray(a.get("atomic_numbers", np.zeros(len(final))), dtype=int)
            centre = final.mean(axis=0)
            frames = np.stack([centre + (final - centre) * s for s in np.linspace(1.6, 1.0, 8)])
            a.update(structure_artifacts(numbers, frames, a.get("cell")))
        self.store.record(record)


def campaign_run(path: Path, campaigns_per_agent: int = 2, budget: int = 3) -> Path:
    """Campaigns of a real lab by a random and a grid agent, side by side in one run."""
    task = labtwin.load_task(LAB, budget=budget)
    with RunStore(path, {"kind": "campaigns", "task": f"labtwin/{LAB}", "budget": budget}) as store:
        batch = CampaignBatch(task, 1, recorder=WithStructures(store))
        rng = np.random.default_rng(0)
        cid = 0
        for agent in ("random", "grid"):
            store.context = {"agent": agent}
            for _ in range(campaigns_per_agent):
                batch.reset([0], [cid])
                for k in range(budget):
                    if agent == "random":
                        proposal = task.random_experiment(rng).model_dump()
                        proposal["n_stages"] = min(proposal["n_stages"], 4)  # quick anneals
                    else:
                        proposal = {
                            "start_temperature": 0.1 + 0.1 * k,
                            "end_temperature": 0.01,
                            "n_stages": 2 + k,
                        }
                    batch.step([0], [proposal])
                store.log_campaign_end(cid, best_score=batch.campaigns[0].best_score)
                cid += 1
    return path


def chat_replies(turn: int) -> str:
    """Scripted replies: a call behind a ``<script>``, a reply without a call, a valid call."""
    if turn == 0:
        call = {"start_temperature": 0.3, "end_temperature": 0.02, "n_stages": 3}
        return SCRIPT_REPLY + " " + format_tool_call(PROPOSE, call)
    if turn == 1:
        return "I am not sure. <img src=x onerror=alert(1)>"
    return format_tool_call(
        PROPOSE, {"start_temperature": 0.2, "end_temperature": 0.01, "n_stages": 4}
    )


def chat_run(path: Path, steps: int = 3, campaigns_per_step: int = 2, budget: int = 3) -> Path:
    """A training run as agents/train.py writes it, with scripted replies instead of a model."""
    task = labtwin.load_task(LAB, budget=budget)
    config = {"kind": "train", "task": f"labtwin/{LAB}", "model": "tiny", "steps": steps}
    with RunStore(path, config) as store:
        store.log_metrics(0, phase="eval_untrained", eval_reward_mean=0.1, eval_valid_fraction=0.5)
        for step in range(1, steps + 1):
            store.context = {"train_step": step}
            env = ChatLabEnv(
                task,
                recorder=WithStructures(store),
                first_campaign_id=(step - 1) * campaigns_per_step,
            )
            env.reset([100 * step + i for i in range(campaigns_per_step)])
            turn = 0
            while env.live:
                env.step([chat_replies(turn) for _ in env.live])
                turn += 1
            for c in env.conversations:
                rewards = [r.reward for r in c.campaign.history]
                store.log_transcript(c.campaign.id, c.messages, rewards)
            store.log_metrics(step, phase="train", **train_metrics(step))
        store.context = {}
        store.log_metrics(
            steps, phase="eval_trained", eval_reward_mean=0.4, eval_valid_fraction=0.9
        )
    return path


def train_metrics(step: int) -> dict[str, float]:
    """The metrics agents/train.py logs per GRPO step (made-up values, known to the tests)."""
    return {
        "reward_mean": 0.1 * step,
        "reward_std": 0.05,
        "valid_fraction": 0.5 + 0.1 * step,
        "loss": -0.01 * step,
        "clip_fraction": 0.02 * step,
        "kl": 0.001 * step,
        "entropy": 2.0 - 0.1 * step,
        "ratio_mean": 1.0,
        "grad_norm": 0.5,
        "groups_kept": 2,
        "tokens_per_s": 100.0 + step,
        "generation_s": 1.0 + 0.1 * step,
        "simulation_s": 0.5,
        "optimisation_s": 0.25,
        "simulation_share": 0.3,
    }


def molecule_structure() -> dict[str, np.ndarray]:
    """Aspirin: one MMFF-optimised RDKit conformer with its bonds (aromatic ones order 4)."""
    from rdkit import Chem
    from rdkit.Chem import AllChem

    mol = Chem.AddHs(Chem.MolFromSmiles("CC(=O)Oc1ccccc1C(=O)O"))
    AllChem.EmbedMolecule(mol, randomSeed=7)
    AllChem.MMFFOptimizeMolecule(mol)
    numbers = [a.GetAtomicNum() for a in mol.GetAtoms()]
    order = {1.0: 1, 2.0: 2, 3.0: 3, 1.5: 4}
    bonds = [
        (b.GetBeginAtomIdx(), b.GetEndAtomIdx(), order[b.GetBondTypeAsDouble()])
        for b in mol.GetBonds()
    ]
    return structure_artifacts(numbers, mol.GetConformer().GetPositions(), bonds=bonds)


def crystal_structure() -> dict[str, np.ndarray]:
    """fcc Cu, 2x2x2 conventional cells, as a 5-frame isotropic relaxation (cell per frame)."""
    from ase.build import bulk

    atoms = bulk("Cu", "fcc", a=3.61, cubic=True).repeat((2, 2, 2))
    scales = np.linspace(1.04, 1.0, 5)
    frames = np.stack([atoms.positions * s for s in scales])
    cells = np.stack([np.asarray(atoms.cell) * s for s in scales])
    return structure_artifacts(atoms.numbers, frames, cells)


def structures_run(path: Path) -> Path:
    """Two records, a molecule and a crystal, each a measurement with a structure."""
    task = labtwin.load_task(LAB, budget=2)
    with RunStore(path, {"kind": "campaigns", "task": "structures", "agent": "test"}) as store:
        batch = CampaignBatch(task, 1, recorder=store)
        (campaign,) = batch.reset([0], [1])
        for step, (name, artifacts, value) in enumerate(
            [("aspirin", molecule_structure(), -1.5), ("Cu fcc", crystal_structure(), 3.61)]
        ):
            m = Measurement(
                "ok",
                {"value": Value(value, "eV", 0.1)},
                cost=1.0,
                cost_unit="h",
                experiment={"structure": name},
                artifacts=artifacts,
            )
            store.record(Record(campaign.id, step, "experiment", m, 0.5 + step * 0.1, 0.1))
    return path


def append_campaign(path: Path, proposal: dict) -> dict:
    """A new campaign of one experiment, appended by a resumed store as a live run would be;
    returns the record line it wrote."""
    task = labtwin.load_task(LAB, budget=3)
    started = [json.loads(x) for x in (path / "campaigns.jsonl").read_text().splitlines()]
    next_id = 1 + max(int(x["campaign"]) for x in started)
    with RunStore(path, resume=True) as store:
        store.context = {"agent": "grid"}
        batch = CampaignBatch(task, 1, recorder=WithStructures(store), first_campaign_id=next_id)
        batch.reset([0], [next_id])
        batch.step([0], [proposal])
    return json.loads((path / "records.jsonl").read_text().splitlines()[-1])
