"""The ``labtwin`` command: list labs, describe one, run campaigns, train an LLM with GRPO.

The CLI is the application layer: unlike the rest of the core it may import
``labtwin.rendering`` and ``labtwin.agents`` (lazily, inside commands).
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
                "summary": _first_sentence(cls.__doc__ or ""),
            }
        )
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    table = Table(title="labtwin labs")
    table.add_column("id", no_wrap=True)
    for col in ("summary", "experiment", "budget", "answer"):
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


@app.command("train")
def train_command(
    task: Annotated[str, typer.Option(help="lab id")] = "BatchReactor-v0",
    model: Annotated[
        str, typer.Option(help="'tiny' or a local Hugging Face model folder")
    ] = "tiny",
    steps: Annotated[int, typer.Option(min=0, help="GRPO steps")] = 20,
    budget: Annotated[int, typer.Option(min=1, help="experiments per campaign")] = 2,
    group_size: Annotated[int, typer.Option(min=2, help="campaigns per seed (GRPO group)")] = 8,
    campaigns_per_step: Annotated[int, typer.Option(min=1, help="groups per step")] = 4,
    learning_rate: Annotated[float | None, typer.Option(help="AdamW learning rate")] = None,
    warmstart_steps: Annotated[int | None, typer.Option(help="supervised warm-start steps")] = None,
    seed: Annotated[int, typer.Option(help="seed of everything")] = 0,
    out: Annotated[Path | None, typer.Option(help="run directory")] = None,
    resume: Annotated[bool, typer.Option(help="continue the run in --out")] = False,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="any TrainConfig field: key=value")
    ] = None,
    progress: Annotated[bool, typer.Option(help="show progress bars")] = True,
) -> None:
    """Train an LLM with GRPO to run campaigns of a lab through tool calls."""
    from dataclasses import fields

    from labtwin import runs
    from labtwin.agents.train import TrainConfig, train
    from labtwin.rendering.plots import plot_training

    _load(task)
    cfg = TrainConfig(
        task=task,
        model=model,
        steps=steps,
        budget=budget,
        group_size=group_size,
        campaigns_per_step=campaigns_per_step,
        seed=seed,
        out=str(out) if out else None,
        resume=resume,
        progress=progress,
    )
    if learning_rate is not None:
        cfg.learning_rate = learning_rate
    if warmstart_steps is not None:
        cfg.warmstart_steps = warmstart_steps
    types = {f.name: f.type for f in fields(TrainConfig)}
    for item in set_ or []:
        key, _, value = item.partition("=")
        if key not in types:
            console.print(f"[red]unknown setting {key!r}; settings: {', '.join(types)}[/]")
            raise typer.Exit(2)
        setattr(cfg, key, _coerce(value, getattr(cfg, key)))
    result = train(cfg)

    table = Table(
        title=f"GRPO on labtwin/{short_id(task)} · {cfg.eval_campaigns} evaluation campaigns"
    )
    for col in ("policy", "mean campaign reward", "valid tool calls"):
        table.add_column(col)
    rows = [
        ("untrained", result.eval_before),
        ("after warm start", result.eval_warm),
        (f"after {cfg.steps} GRPO steps", result.eval_after),
    ]
    for name, ev in rows:
        if ev:
            table.add_row(
                name,
                f"{ev['reward_mean']:+.4f} ± {ev['reward_std']:.3f}",
                f"{ev['valid_fraction']:.0%}",
            )
    console.print(table)
    plot = result.run_dir / "training.png"
    plot_training(runs.load(result.run_dir)).savefig(plot)
    console.print(f"run written to [bold]{result.run_dir}[/] (plot: {plot})")


def _coerce(text: str, current: object) -> object:
    if isinstance(current, bool):
        return text.lower() in ("1", "true", "yes", "on")
    if isinstance(current, int):
        return int(text)
    if isinstance(current, float):
        return float(text)
    if current is None and text.lower() == "none":
        return None
    return text


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


def _first_sentence(doc: str) -> str:
    paragraph = " ".join(doc.strip().split("\n\n")[0].split())
    return paragraph.split(". ")[0].rstrip(".") + "." if paragraph else ""


def _load(task: str):
    try:
        return load_task(task)
    except KeyError as err:
        console.print(f"[red]{err.args[0]}[/]")
        raise typer.Exit(2) from None


def main() -> None:
    app()
