"""Inline HTML for Jupyter: runs, campaigns, measurements and labs show themselves.

:func:`html` is the ``_repr_html_`` of :class:`labtwin.runs.Run`,
:class:`labtwin.campaign.Campaign`, :class:`labtwin.measurement.Measurement` and
:class:`labtwin.task.Task`. The core does not import this module: it finds it
through the ``labtwin.html`` entry point (:mod:`labtwin.display`).

A run, a campaign and a measurement with a structure show the viewer page, with
its assets and data inlined, in a sandboxed ``<iframe srcdoc>`` (scripts run in
an origin of their own; nothing is loaded from anywhere, so it works offline
and in a notebook saved to disk). A lab and a measurement without a structure
are plain HTML tables. Every text is escaped.
"""

from __future__ import annotations

import html as _html
import json
from typing import Any

import numpy as np

from labtwin.campaign import Campaign, Record
from labtwin.measurement import Measurement
from labtwin.rendering.report import report_data
from labtwin.rendering.viewer.page import inline_page
from labtwin.rendering.viewer.reader import structure_json
from labtwin.runs import Run
from labtwin.structures import NAMES, POSITIONS, has_structure
from labtwin.task import Task

#: iframe heights in pixels
RUN_HEIGHT = 900
MEASUREMENT_HEIGHT = 440


def html(obj: Any) -> str | None:
    """Inline HTML for a run, a campaign, a measurement or a lab (None for anything else)."""
    if isinstance(obj, Run):
        return run_html(obj)
    if isinstance(obj, Campaign):
        return campaign_html(obj)
    if isinstance(obj, Measurement):
        return measurement_html(obj)
    if isinstance(obj, Task):
        return task_html(obj)
    return None


def iframe(page: str, height: int, title: str) -> str:
    """``page`` in a sandboxed iframe (scripts allowed, no access to the notebook's origin)."""
    return (
        f'<iframe title="{_html.escape(title)}" sandbox="allow-scripts" '
        f'style="width: 100%; height: {int(height)}px; border: 1px solid #e3e6eb; '
        f'border-radius: 6px" srcdoc="{_html.escape(page, quote=True)}"></iframe>'
    )


def run_html(run: Run) -> str:
    data = report_data(run.path)
    task = str(run.config.get("task", "run")).removeprefix("labtwin/")
    return iframe(inline_page(data, f"labtwin · {task}"), RUN_HEIGHT, f"labtwin run {task}")


def _record_line(record: Record, key: str, structures: dict[str, Any]) -> dict[str, Any]:
    """A record as the run store writes it; a structure goes to ``structures`` under ``key``."""
    line = record.to_dict()
    artifacts = record.measurement.artifacts
    line["measurement"]["artifacts"] = {}
    if has_structure(artifacts):
        try:
            structures[key] = structure_json({k: artifacts[k] for k in NAMES if k in artifacts})
        except (KeyError, ValueError):
            return line
        # the page looks a structure up by its positions path; the other names only mark it
        line["measurement"]["artifacts"] = {k: f"{key}/{k}" for k in NAMES if k in artifacts}
        line["measurement"]["artifacts"][POSITIONS] = key
    return line


def campaign_html(campaign: Campaign) -> str:
    """A campaign in memory (e.g. ``env.campaign``): its records, scores and structures."""
    structures: dict[str, Any] = {}
    records = [
        _record_line(r, f"memory:{campaign.id}:{r.step}", structures) for r in campaign.history
    ]
    start = {
        "event": "start",
        "campaign": campaign.id,
        "task": campaign.task.id,
        "seed": campaign.seed,
        "budget": campaign.task.budget,
        "conditions": campaign.conditions,
    }
    data = {
        "name": f"campaign {campaign.id}",
        "config": {"task": campaign.task.id, "kind": "campaign", "budget": campaign.task.budget},
        "lines": {"campaigns": [_jsonable(start)], "records": _jsonable(records)},
        "structures": structures,
    }
    title = f"labtwin · {campaign.task.id} · campaign {campaign.id}"
    return iframe(inline_page(data, title), RUN_HEIGHT, title)


def measurement_html(m: Measurement) -> str:
    """A measurement: its 3D structure (where it has one) beside its values."""
    if not has_structure(m.artifacts):
        return _measurement_table(m)
    record = Record(0, 0, "experiment", m, None, 0.0, proposal=m.experiment)
    structures: dict[str, Any] = {}
    line = _record_line(record, "memory:measurement", structures)
    data = {
        "name": "measurement",
        "config": {"task": m.provenance.get("task", "measurement"), "kind": "measurement"},
        "lines": {"records": _jsonable([line])},
        "structures": structures,
        "panels": "record",
        "selected": "0:0:",
    }
    return iframe(inline_page(data, "labtwin measurement"), MEASUREMENT_HEIGHT, "measurement")


def _jsonable(value: Any) -> Any:
    """JSON types only (what the run store writes): round-trips through json."""
    return json.loads(json.dumps(value, default=_default, allow_nan=False))


def _default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


def _e(value: Any) -> str:
    return _html.escape(str(value), quote=True)


def _measurement_table(m: Measurement) -> str:
    rows = "".join(
        f"<tr><td>{_e(k)}</td><td>{v.value:.6g}</td>"
        f"<td>{f'± {v.uncertainty:.3g}' if v.uncertainty else ''}</td><td>{_e(v.unit)}</td></tr>"
        for k, v in m.observables.items()
    )
    reason = f"<div>{_e(m.reason)}</div>" if m.reason else ""
    cost = f"cost {m.cost:.4g} {_e(m.cost_unit)}" if m.cost else ""
    return (
        f'<div class="labtwin-measurement"><b>measurement · {_e(m.status)}</b> {cost}{reason}'
        "<table><thead><tr><th>observable</th><th>value</th><th>uncertainty</th><th>unit</th>"
        f"</tr></thead><tbody>{rows}</tbody></table></div>"
    )


def task_html(task: Task) -> str:
    """A lab: its brief, experiment fields, observables, reward and budget."""
    info = type(task).describe()
    fields = "".join(
        f"<tr><td>{_e(name)}</td><td>{_e(p.get('type', ''))}</td>"
        f"<td>{_e(_range(p))}</td><td>{_e(p.get('unit', ''))}</td>"
        f"<td>{_e(p.get('description', ''))}</td></tr>"
        for name, p in info["experiment_schema"].get("properties", {}).items()
    )
    observables = "".join(
        f"<tr><td>{_e(o['name'])}</td><td>{_e(o['unit'])}</td><td>{_e(o['description'])}</td></tr>"
        for o in info["observables"]
    )
    return (
        f'<div class="labtwin-task"><h3>labtwin/{_e(info["id"])}</h3>'
        f'<pre style="white-space: pre-wrap">{_e(info["brief"])}</pre>'
        "<b>experiment</b><table><thead><tr><th>field</th><th>type</th><th>range</th>"
        f"<th>unit</th><th>description</th></tr></thead><tbody>{fields}</tbody></table>"
        "<b>observables</b><table><thead><tr><th>name</th><th>unit</th><th>description</th>"
        f"</tr></thead><tbody>{observables}</tbody></table>"
        f"<p><b>reward:</b> {_e(info['reward'])}<br><b>budget:</b> {task.budget} experiments"
        f"{'; cost in ' + _e(info['cost_unit']) if info['cost_unit'] else ''}</p></div>"
    )


def _range(prop: dict[str, Any]) -> str:
    if "minimum" in prop or "maximum" in prop:
        return f"{prop.get('minimum', '')} .. {prop.get('maximum', '')}"
    if "enum" in prop:
        return ", ".join(map(str, prop["enum"]))
    return ""
