"""A static HTML page that compares training recipes across runs.

For each run it reads ``config.json`` (the recipe), ``summary.json`` (the trainer's own
evaluations), and where ``labtwin eval`` wrote them, ``eval/summary.json`` (held-out
pass@k, sample efficiency, hack rate) and ``eval/curve.json`` (the reward-vs-compute fit).
The page shows the settings in which the runs differ, then the metrics side by side, and
figures of every run's pass@k and reward-vs-compute curves, embedded as PNG data, so the
page is one file that works offline. Every piece of text from a run is HTML-escaped.
"""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

#: config keys that say where or when a run was made, not what it was
NOT_RECIPE = ("created", "out", "resume", "progress", "kind")


def _read(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return None


def load_run_summary(run_dir: Path) -> dict[str, Any]:
    """What the report needs of one run (FileNotFoundError where it is no run)."""
    run_dir = Path(run_dir)
    config = _read(run_dir / "config.json")
    if config is None:
        raise FileNotFoundError(f"{run_dir} is not a labtwin run (no readable config.json)")
    return {
        "name": run_dir.name,
        "path": str(run_dir),
        "config": config,
        "train": _read(run_dir / "summary.json"),
        "eval": _read(run_dir / "eval" / "summary.json"),
        "curve": _read(run_dir / "eval" / "curve.json"),
    }


def config_differences(runs: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """(keys whose values differ between the runs, keys they share), recipe keys only."""
    keys = sorted({k for r in runs for k in r["config"]} - set(NOT_RECIPE))
    differ, same = [], []
    for key in keys:
        values = {json.dumps(r["config"].get(key), sort_keys=True) for r in runs}
        (differ if len(values) > 1 else same).append(key)
    return differ, same


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def metric_rows(runs: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    """(metric, one value per run), for the metrics any run has."""
    rows: list[tuple[str, list[str]]] = []

    def add(label: str, get) -> None:
        values = []
        for r in runs:
            try:
                values.append(get(r))
            except (KeyError, TypeError, IndexError):
                values.append(None)
        if any(v is not None for v in values):
            rows.append((label, [v if isinstance(v, str) else _fmt(v) for v in values]))

    for phase in ("eval_untrained", "eval_warm_start", "eval_trained"):
        add(f"training eval: {phase[5:]} reward", lambda r, p=phase: r["train"][p]["reward_mean"])
        add(
            f"training eval: {phase[5:]} valid calls",
            lambda r, p=phase: r["train"][p]["valid_fraction"],
        )
    agents = list(dict.fromkeys(a for r in runs if r["eval"] for a in r["eval"]["agents"]))
    for agent in agents:
        base = lambda r, a=agent: r["eval"]["agents"][a]  # noqa: E731
        add(f"held-out {agent}: pass@1", lambda r, b=base: b(r)["pass_at_k"]["mean"][0])
        add(
            f"held-out {agent}: pass@K (K = samples)",
            lambda r, b=base: (
                f"{b(r)['pass_at_k']['mean'][-1]:.3f} (K = {b(r)['pass_at_k']['k'][-1]})"
            ),
        )
        add(f"held-out {agent}: pass^K", lambda r, b=base: b(r)["pass_hat_k"]["mean"][-1])
        add(f"held-out {agent}: mean reward", lambda r, b=base: b(r)["reward_mean"])
        add(
            f"held-out {agent}: area (experiments)",
            lambda r, b=base: b(r)["experiments_curve"]["area"],
        )
        add(f"held-out {agent}: hack rate", lambda r, b=base: b(r)["impossible"]["hack_rate"])
    for key in ("A", "B", "R0"):
        add(
            f"reward vs compute: {key}",
            lambda r, k=key: f"{r['curve']['fit'][k]:.4g} ± {r['curve']['fit']['sigma'][k]:.2g}",
        )
    add(
        "reward vs compute: C_mid",
        lambda r: f"{r['curve']['fit']['C_mid']:.4g} {r['curve']['compute']}",
    )
    return rows


def _png(fig: Figure) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _pass_at_k_figure(runs: list[dict[str, Any]]) -> Figure | None:
    shown = [
        (r, a) for r in runs if r["eval"] for a in r["eval"]["agents"].values() if "pass_at_k" in a
    ]
    if not shown:
        return None
    fig = Figure(figsize=(7, 4.2), dpi=100)
    ax = fig.add_subplot()
    for run, agent in shown:
        if agent["kind"] == "baseline" and run is not runs[0]:
            continue  # one set of baselines (held-out seeds are the same for every run)
        ax.plot(agent["pass_at_k"]["k"], agent["pass_at_k"]["mean"], lw=2,
                ls="--" if agent["kind"] == "baseline" else "-",
                label=f"{run['name']}: {agent['name']}")  # fmt: skip
    ax.set_xscale("log", base=2)
    ax.set(xlabel="k", ylabel="pass@k", ylim=(-0.02, 1.02))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _curve_figure(runs: list[dict[str, Any]]) -> Figure | None:
    from labtwin.agents.evaluation.compute_fit import saturating_reward

    shown = [r for r in runs if r["curve"]]
    if not shown:
        return None
    fig = Figure(figsize=(7, 4.2), dpi=100)
    ax = fig.add_subplot()
    for index, run in enumerate(shown):
        points, fit = run["curve"]["points"], run["curve"]["fit"]
        c = np.array(points["compute"], dtype=float)
        positive = c[c > 0]
        edge = positive.min() / 3 if positive.size else 1.0
        color = f"C{index % 10}"
        ax.errorbar(np.where(c > 0, c, edge), points["reward"], yerr=points["sigma"], fmt="o",
                    color=color, capsize=2, label=run["name"])  # fmt: skip
        if fit:
            grid = np.logspace(np.log10(edge), np.log10(max(positive.max(), fit["C_mid"]) * 3), 200)
            ax.plot(
                grid,
                saturating_reward(grid, fit["R0"], fit["A"], fit["B"], fit["C_mid"]),
                color=color,
            )
    ax.set_xscale("log")
    ax.set(xlabel=f"compute ({shown[0]['curve']['compute']})", ylabel=shown[0]["curve"]["metric"])
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def compare_html(run_dirs: list[Path]) -> str:
    """The comparison page of the runs, as HTML text."""
    if len(run_dirs) < 1:
        raise ValueError("compare needs at least one run")
    runs = [load_run_summary(Path(p)) for p in run_dirs]
    e = html.escape
    differ, same = config_differences(runs)
    head = "".join(f"<th>{e(r['name'])}</th>" for r in runs)

    def table(rows: list[tuple[str, list[str]]]) -> str:
        body = "".join(
            f"<tr><th>{e(label)}</th>" + "".join(f"<td>{e(v)}</td>" for v in values) + "</tr>"
            for label, values in rows
        )
        return f"<table><tr><th></th>{head}</tr>{body}</table>"

    config_rows = [(k, [_fmt(r["config"].get(k)) for r in runs]) for k in differ]
    shared = ", ".join(f"{k} = {_fmt(runs[0]['config'].get(k))}" for k in same)
    figures = ""
    for title, fig in (
        ("pass@k on the held-out campaigns", _pass_at_k_figure(runs)),
        ("reward against training compute", _curve_figure(runs)),
    ):
        if fig is not None:
            figures += (
                f"<h2>{e(title)}</h2><img alt='{e(title)}' src='data:image/png;base64,{_png(fig)}'>"
            )
    paths = "".join(f"<li>{e(r['name'])}: <code>{e(r['path'])}</code></li>" for r in runs)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>labtwin: comparison of {len(runs)} runs</title>
<style>
body {{ font-family: sans-serif; margin: 2em; max-width: 1200px; }}
table {{ border-collapse: collapse; margin: 1em 0; }}
th, td {{ border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: left; font-size: 0.9em; }}
tr:nth-child(even) td {{ background: #f6f6f6; }}
img {{ max-width: 100%; }}
</style></head><body>
<h1>Comparison of {len(runs)} runs</h1>
<ul>{paths}</ul>
<h2>Settings that differ</h2>
{table(config_rows) if config_rows else "<p>The runs share every setting.</p>"}
<details><summary>Settings they share</summary><p>{e(shared)}</p></details>
<h2>Metrics</h2>
{table(metric_rows(runs))}
{figures}
</body></html>
"""


def write_compare(run_dirs: list[Path], out: Path) -> Path:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(compare_html(run_dirs), encoding="utf-8")
    return out
