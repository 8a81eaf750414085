"""labtwin: scientific digital-twin laboratories for reinforcement learning.

Core nouns (see docs/concepts.md):

- :class:`Experiment` — what an agent proposes (a pydantic model per lab),
- :class:`Measurement` — what the lab returns (observables, cost, status, provenance),
- :class:`Task` — a lab protocol: experiment model, batched simulator call, reward, budget,
- :class:`CampaignBatch` — the one engine that advances campaigns, making :class:`Record` s,
- :class:`LabEnv` / :class:`VectorLabEnv` — a campaign as a Gymnasium (vector) env,
- :mod:`labtwin.runs` — the append-only run store.

``import labtwin`` registers every installed lab with Gymnasium as
``labtwin/<Name>-v<N>``.
"""

from labtwin import display, runs
from labtwin.campaign import Campaign, CampaignBatch, Record, replay
from labtwin.env import LabEnv
from labtwin.experiment import (
    Analysis,
    Answer,
    Experiment,
    Invalid,
    NumericView,
    knob,
    parse_experiment,
    tool_schema,
)
from labtwin.measurement import Measurement, ObservableSpec, Value
from labtwin.registry import discover, list_tasks, load_task, make, make_vec, register_task
from labtwin.task import Task
from labtwin.vector import VectorLabEnv

__version__ = "0.1.0"

__all__ = [
    "Analysis",
    "Answer",
    "Campaign",
    "CampaignBatch",
    "Record",
    "replay",
    "Experiment",
    "Invalid",
    "LabEnv",
    "Measurement",
    "NumericView",
    "ObservableSpec",
    "Task",
    "Value",
    "VectorLabEnv",
    "discover",
    "knob",
    "list_tasks",
    "load_task",
    "make",
    "make_vec",
    "parse_experiment",
    "register_task",
    "runs",
    "tool_schema",
]

# in a notebook these show themselves (HTML from the labtwin.html entry point: labtwin.rendering)
display.install(runs.Run, Campaign, Measurement, Task)
discover()
