"""The ``labtwin`` command: list labs, describe one, run campaigns with a baseline agent.

The CLI is the application layer: unlike the rest of the core it may import
``labtwin.rendering`` (lazily, inside commands).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from labtwin.registry import list_tasks, load_task, short_id

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)
console = Console()


@app.command("tasks")
def tasks_command(
    as_json: Annotated[bool, typer.Option("--json", help="print JSON instead of a table")] = False,
) -> None:
    """List the registered labs."""
    rows = []
    for task_id in list_tasks():
        cls = type(load_task(task_id))
        rows.append(
            {
                "id": task_id,
                "experiment": list(cls.experiment_model.model_fields),
                "observables": [o.name for o in cls.observables],
                "budget": cls.default_budget,
                "final_answer": cls.answer_model is not None,
                "summary": (cls.__doc__ or "").strip().splitlines()[0],
            }
        )
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    table = Table(title="labtwin labs")
    for col in ("id", "summary", "experiment", "budget", "answer"):
        table.add_column(col)
    for r in rows:
        table.add_row(
            r["id"],
            r["summary"],
            ", ".join(r["experiment"]),
            str(r["budget"]),
            "yes" if r["final_answer"] else "",
        )
    console.print(table)


@app.command("describe")
def describe_command(
    task: Annotated[str, typer.Argument(help="lab id, e.g. BatchReactor-v0")],
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Show a lab's brief, experiment schema, observables and reward."""
    info = type(_load(task)).describe()
    if as_json:
        print(json.dumps(info, indent=2))
        return
    console.rule(f"[bold]labtwin/{info['id']}")
    console.print(info["brief"])
    table = Table(title="experiment")
    for col in ("field", "type", "range", "unit", "description"):
        table.add_column(col)
    for name, prop in info["experiment_schema"]["properties"].items():
        lo, hi = prop.get("minimum", ""), prop.get("maximum", "")
        table.add_row(
            name,
            prop.get("type", ""),
            f"{lo} .. {hi}" if lo != "" else "",
            prop.get("unit", ""),
            escape(prop.get("description", "")),
        )
    console.print(table)
    obs = Table(title="observables")
    for col in ("name", "unit", "description"):
        obs.add_column(col)
    for o in info["observables"]:
        obs.add_row(o["name"], o["unit"], o["description"])
    console.print(obs)
    console.print(f"[bold]reward:[/] {info['reward']}")
    console.print(
        f"[bold]budget:[/] {info['budget']} experiments; cost in {info['cost_unit'] or '-'}"
    )
    if info["answer_schema"]:
        console.print(f"[bold]final answer:[/] {json.dumps(info['answer_schema']['properties'])}")


@app.command("run")
def run_command(
    task: Annotated[str, typer.Argument(help="lab id, e.g. BatchReactor-v0")],
    agent: Annotated[str, typer.Option(help="random | cmaes | bo")] = "random",
    campaigns: Annotated[int, typer.Option(min=1, help="number of campaigns")] = 4,
    seed: Annotated[int, typer.Option(help="campaign i uses seed + i")] = 0,
    budget: Annotated[int | None, typer.Option(min=1, help="experiments per campaign")] = None,
    out: Annotated[
        Path | None, typer.Option(help="run directory (default runs/<task>-<agent>-<time>)")
    ] = None,
    progress: Annotated[bool, typer.Option(help="show a progress bar")] = True,
) -> None:
    """Run campaigns of a lab with a baseline agent and record them in a run directory."""
    from labtwin.runner import run_campaigns

    _load(task)
    kwargs = {"budget": budget} if budget else {}
    summaries, path = run_campaigns(task, agent, campaigns, seed, out, progress, **kwargs)
    table = Table(title=f"labtwin/{short_id(task)} · {agent} · best measured outcome per campaign")
    for col in ("campaign", "best score", "best experiment", "measured", "cost"):
        table.add_column(col)
    for s in summaries:
        experiment = ", ".join(
            f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
            for k, v in (s.best_experiment or {}).items()
        )
        measured = ", ".join(f"{k} = {v}" for k, v in list(s.best_observables.items())[:3])
        table.add_row(
            str(s.campaign),
            f"{s.best_score:.4f}",
            experiment,
            measured,
            f"{s.cost:.3g} {s.cost_unit}",
        )
    console.print(table)
    mean = sum(s.best_score for s in summaries) / len(summaries)
    console.print(f"mean best score {mean:.4f} over {len(summaries)} campaigns")
    console.print(f"run written to [bold]{path}[/]")
    from labtwin import runs
    from labtwin.rendering.plots import save_campaign_plot  # the CLI composes subpackages

    console.print(f"plot written to [bold]{save_campaign_plot(runs.load(path))}[/]")


@app.command("plot")
def plot_command(
    run: Annotated[Path, typer.Argument(help="run directory")],
    out: Annotated[Path | None, typer.Option(help="PNG path (default <run>/campaigns.png)")] = None,
) -> None:
    """Plot best score against experiments for every campaign of a run."""
    from labtwin import runs
    from labtwin.rendering.plots import save_campaign_plot

    path = save_campaign_plot(runs.load(run), out)
    console.print(f"plot written to [bold]{path}[/]")


def _load(task: str):
    try:
        return load_task(task)
    except KeyError as err:
        console.print(f"[red]{err.args[0]}[/]")
        raise typer.Exit(2) from None


def main() -> None:
    app()
