"""The ``labtwin`` command: list labs, describe one, run campaigns, train an LLM with GRPO.

The CLI is the application layer: unlike the rest of the core it may import
``labtwin.rendering`` and ``labtwin.agents`` (lazily, inside commands; the
``train`` command's options are built from ``labtwin.agents.train_config``,
which imports neither torch nor transformers).
"""

from __future__ import annotations

import inspect
import json
from dataclasses import fields
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from labtwin.registry import list_tasks, load_task, short_id

#: what ``labtwin --help`` says (the module docstring above is for developers)
HELP = (
    "labtwin: simulated science labs as reinforcement-learning environments. List the labs, "
    "describe one, run campaigns with a baseline agent, train an LLM with GRPO, evaluate "
    "agents, and plot, view or report a run."
)
app = typer.Typer(add_completion=False, no_args_is_help=True, help=HELP)
console = Console()
#: terminal columns from which ``labtwin tasks`` also lists each lab's knobs
TASKS_KNOBS_WIDTH = 110


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
    # in a narrow terminal the knob names squeeze the summaries into columns a word wide
    wide = console.width >= TASKS_KNOBS_WIDTH
    table = Table(
        title="labtwin labs",
        caption=None if wide else "each lab's knobs: labtwin describe <id>",
    )
    table.add_column("id", no_wrap=True)
    columns = (
        ["summary", "experiment", "budget", "answer"] if wide else ["summary", "budget", "answer"]
    )
    for col in columns:
        table.add_column(col)
    for r in rows:
        cells = {
            "summary": r["summary"],
            "experiment": ", ".join(r["experiment"]),
            "budget": str(r["budget"]),
            "answer": "yes" if r["final_answer"] else "",
        }
        table.add_row(r["id"], *(cells[c] for c in columns))
    console.print(table)


@app.command("describe")
def describe_command(
    task: Annotated[str, typer.Argument(help="lab id, e.g. BatchReactor-v1")],
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
    task: Annotated[str, typer.Argument(help="lab id, e.g. BatchReactor-v1")],
    agent: Annotated[str, typer.Option(help="random | cmaes | bo")] = "random",
    campaigns: Annotated[int, typer.Option(min=1, help="number of campaigns")] = 4,
    seed: Annotated[int, typer.Option(min=0, help="campaign i uses seed + i")] = 0,
    budget: Annotated[int | None, typer.Option(min=1, help="experiments per campaign")] = None,
    out: Annotated[
        Path | None, typer.Option(help="run directory (default runs/<task>-<agent>-<time>)")
    ] = None,
    progress: Annotated[bool, typer.Option(help="show a progress bar")] = True,
    ray: Annotated[
        str | None,
        typer.Option(
            help="step campaigns on Ray: 'auto' (a running cluster, else a local one) or ADDRESS"
        ),
    ] = None,
    lab_workers: Annotated[
        int | None, typer.Option(min=1, help="Ray lab workers (default: one per GPU, else per CPU)")
    ] = None,
) -> None:
    """Run campaigns of a lab with a baseline agent and record them in a run directory."""
    from labtwin.runner import list_agents, run_campaigns

    _load(task)
    if agent not in list_agents():
        _fail(f"unknown agent {agent!r}; agents: {', '.join(list_agents())}")
    if out is not None and (out / "config.json").exists():
        _fail(f"{out} already holds a run; choose another --out")
    kwargs = {"budget": budget} if budget else {}
    try:
        summaries, path = run_campaigns(
            task, agent, campaigns, seed, out, progress, ray=ray, lab_workers=lab_workers, **kwargs
        )
    except ValueError as err:  # the agent cannot run this lab (e.g. CMA-ES on a text lab)
        _fail(str(err))
    table = Table(title=f"labtwin/{short_id(task)} · {agent} · best measured outcome per campaign")
    confirmed = any(s.confirmed_score is not None for s in summaries)
    columns = ("campaign", "best score") + (("confirmed",) if confirmed else ())
    for col in (*columns, "best experiment", "measured", "cost"):
        table.add_column(col)
    for s in summaries:
        experiment = ", ".join(
            f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
            for k, v in (s.best_experiment or {}).items()
        )
        measured = ", ".join(f"{k} = {v}" for k, v in list(s.best_observables.items())[:3])
        shown = [f"{s.confirmed_score:.4f}" if s.confirmed_score is not None else "-"]
        table.add_row(
            str(s.campaign),
            f"{s.best_score:.4f}",
            *(shown if confirmed else []),
            experiment,
            measured,
            f"{s.cost:.3g} {s.cost_unit}",
        )
    console.print(table)
    mean = sum(s.best_score for s in summaries) / len(summaries)
    console.print(f"mean best score {mean:.4f} over {len(summaries)} campaigns")
    if confirmed:
        earned = sum(s.result_score for s in summaries) / len(summaries)
        console.print(
            f"mean earned {earned:.4f}: the lower of the best score and its confirmation, "
            "a fresh measurement of the best experiment"
        )
    console.print(f"run written to [bold]{path}[/]")
    from labtwin import runs
    from labtwin.rendering.plots import save_campaign_plot  # the CLI composes subpackages

    console.print(f"plot written to [bold]{save_campaign_plot(runs.load(path))}[/]")


# ---- train: every option generated from TrainConfig (the one source of its defaults) ----

# shown first in --help; every other field is under "All settings"
_COMMON_TRAIN_OPTIONS = (
    "task",
    "model",
    "steps",
    "budget",
    "group_size",
    "campaigns_per_step",
    "learning_rate",
    "warmstart_steps",
    "seed",
    "out",
    "resume",
    "progress",
)


def train_command(set_: list[str] | None = None, **options: Any) -> None:
    """Train an LLM with GRPO to run campaigns of a lab through tool calls.

    Every option is a field of labtwin.agents.train.TrainConfig; --set key=value
    reaches the same fields (and overrides the options).
    """
    from labtwin.agents.train_config import TrainConfig, field_types

    values = dict(options)
    types = field_types()
    for item in set_ or []:
        key, sep, text = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep:
            _fail(f"--set {item!r}: expected key=value")
        if key not in types:
            _fail(f"--set {item!r}: unknown setting {key!r}; settings: {', '.join(types)}")
        try:
            values[key] = _coerce(text.strip(), types[key])
        except ValueError as err:
            _fail(f"--set {key}={text}: {err}")
    try:
        cfg = TrainConfig(**values)
    except ValueError as err:
        _fail(str(err))

    from labtwin import runs
    from labtwin.agents.train import resolve_run, train
    from labtwin.rendering.plots import plot_training

    try:
        run_dir, _ = resolve_run(cfg)
    except (FileNotFoundError, FileExistsError) as err:
        _fail(str(err))
    cfg.out = str(run_dir)
    result = train(cfg)

    table = Table(
        title=f"GRPO on labtwin/{short_id(cfg.task)} · {cfg.eval_campaigns} evaluation campaigns"
    )
    for col in ("policy", "mean campaign reward", "valid tool calls"):
        table.add_column(col)
    rows = [
        ("untrained", result.eval_before),
        ("after warm start", result.eval_warm),
        (f"after {cfg.steps} GRPO step{'' if cfg.steps == 1 else 's'}", result.eval_after),
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
    console.print(
        f"run written to [bold]{result.run_dir}[/] (plot: {plot}; watch it: labtwin view {result.run_dir})"
    )


def _train_signature() -> inspect.Signature:
    """``--<field>`` for every TrainConfig field (its type, default and help line), and --set."""
    from labtwin.agents.train_config import TrainConfig, field_help, field_types

    types, helps = field_types(), field_help()
    params = []
    for f in fields(TrainConfig):
        option = typer.Option(
            help=escape(helps[f.name]),
            rich_help_panel=None if f.name in _COMMON_TRAIN_OPTIONS else "All settings",
        )
        params.append(
            inspect.Parameter(
                f.name,
                inspect.Parameter.KEYWORD_ONLY,
                default=f.default,
                annotation=Annotated[types[f.name], option],
            )
        )
    set_option = typer.Option(
        "--set",
        metavar="KEY=VALUE",
        help="any TrainConfig field as key=value (repeatable); overrides the options",
    )
    params.append(
        inspect.Parameter(
            "set_",
            inspect.Parameter.KEYWORD_ONLY,
            default=None,
            annotation=Annotated[list[str] | None, set_option],
        )
    )
    return inspect.Signature(params)


train_command.__signature__ = _train_signature()  # type: ignore[attr-defined]
app.command("train")(train_command)


# ---- eval: pass@k, sample efficiency, hack rate; reward vs compute; comparing recipes ----


def _eval_default(name: str) -> Any:
    """An EvalConfig field's default (the one source of the evaluation's defaults)."""
    from labtwin.agents.evaluation.config import EvalConfig

    return getattr(EvalConfig, name)


def _eval_help(name: str) -> str:
    from labtwin.agents.evaluation.config import eval_field_help

    return escape(eval_field_help()[name])


@app.command("eval")
def eval_command(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(help="a training run or a checkpoint folder in one; with --compare, runs"),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(help="'tiny' (the untrained tiny model) or a local Hugging Face model folder"),
    ] = None,
    task: Annotated[str | None, typer.Option(help="lab id (default: the run's)")] = None,
    checkpoint: Annotated[
        str | None, typer.Option(help="the run's checkpoint to evaluate (default: the latest)")
    ] = None,
    agents: Annotated[
        str | None,
        typer.Option(
            help="comma-separated: untrained, warm_start, trained, model, random, cmaes, bo "
            "(default: all that apply)"
        ),
    ] = None,
    campaigns: Annotated[int, typer.Option(help=_eval_help("campaigns"))] = _eval_default(
        "campaigns"
    ),
    samples: Annotated[int, typer.Option(help=_eval_help("samples"))] = _eval_default("samples"),
    hack_samples: Annotated[int, typer.Option(help=_eval_help("hack_samples"))] = _eval_default(
        "hack_samples"
    ),
    budget: Annotated[int | None, typer.Option(help=_eval_help("budget"))] = None,
    seed: Annotated[int, typer.Option(help=_eval_help("seed"))] = _eval_default("seed"),
    batch_campaigns: Annotated[
        int, typer.Option(help=_eval_help("batch_campaigns"))
    ] = _eval_default("batch_campaigns"),
    threads: Annotated[int, typer.Option(help=_eval_help("threads"))] = _eval_default("threads"),
    records: Annotated[bool, typer.Option(help=_eval_help("records"))] = _eval_default("records"),
    out: Annotated[
        Path | None,
        typer.Option(help="output folder (default <run>/eval) or, with --compare, HTML file"),
    ] = None,
    overwrite: Annotated[bool, typer.Option(help="replace an earlier evaluation in --out")] = False,
    curve: Annotated[
        bool, typer.Option("--curve", help="fit reward against the run's training compute")
    ] = False,
    compute: Annotated[
        str,
        typer.Option(
            help="--curve's compute axis: cpu_s, generation_cpu_s, tokens_generated, "
            "tokens_trained, wall_s"
        ),
    ] = "cpu_s",
    metric: Annotated[
        str, typer.Option(help="what --curve fits: reward_mean or success_rate")
    ] = "reward_mean",
    compare: Annotated[
        bool, typer.Option("--compare", help="an HTML page comparing the runs' recipes")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the results as JSON")] = False,
    progress: Annotated[bool, typer.Option(help="say which agent runs")] = True,
) -> None:
    """Evaluate agents on held-out campaigns: pass@k, pass^k, sample efficiency, hack rate.

    RUN: a training run's untrained, warm-started and trained policies, and the baselines.
    --model: a model on --task. --curve: reward against a run's training compute.
    --compare: an HTML page comparing the recipes and metrics of runs.
    """
    paths = list(paths or [])
    if curve and compare:
        _fail("choose one of --curve and --compare")
    if compare:
        from labtwin.agents.evaluation.report import write_compare

        if not paths:
            _fail("--compare needs the runs to compare")
        from time import strftime

        target = out or Path("runs") / f"compare-{strftime('%Y%m%d-%H%M%S')}.html"
        try:
            written = write_compare(paths, target)
        except FileNotFoundError as err:
            _fail(str(err))
        if as_json:
            print(json.dumps({"report": str(written), "runs": [str(p) for p in paths]}))
        else:
            console.print(f"comparison written to [bold]{escape(str(written))}[/]")
        return
    if len(paths) > 1:
        _fail("give one run (several only with --compare)")
    if curve:
        from labtwin.agents.evaluation.scaling import fit_run

        if not paths:
            _fail("--curve needs a training run")
        try:
            points, fit, reason = fit_run(paths[0], compute, metric, out)
        except (FileNotFoundError, ValueError) as err:
            _fail(str(err))
        where = (out or paths[0] / "eval").resolve()
        if as_json:
            print((where / "curve.json").read_text())
            return
        table = Table(title=f"{metric} against {compute} · {len(points.step)} evaluations")
        for col in ("parameter", "value", "standard error"):
            table.add_column(col)
        if fit is not None:
            table.add_row("A (ceiling)", f"{fit.A:.4f}", f"{fit.sigma['A']:.4f}")
            table.add_row("B (efficiency)", f"{fit.B:.3f}", f"{fit.sigma['B']:.3f}")
            low, high = fit.C_mid_range
            table.add_row("C_mid", f"{fit.C_mid:.4g}", f"1 sigma: {low:.4g} .. {high:.4g}")
            table.add_row("R0", f"{fit.R0:.4f}", f"{fit.sigma['R0']:.4f}")
            console.print(table)
            if fit.at_bound:
                console.print(f"[yellow]at a bound of the fit: {', '.join(fit.at_bound)}[/]")
        else:
            console.print(f"[yellow]no fit: {escape(reason)}[/]")
        console.print(f"curve written to [bold]{escape(str(where))}[/] (reward_vs_compute.png)")
        return

    from labtwin.agents.evaluation.config import EvalConfig
    from labtwin.agents.evaluation.driver import (
        TABLE_COLUMNS,
        evaluate_agents,
        plan,
        remove_evaluation,
        table_rows,
    )

    names = [n.strip() for n in agents.split(",") if n.strip()] if agents else None
    try:
        ecfg = EvalConfig(
            budget=budget,
            campaigns=campaigns,
            samples=samples,
            hack_samples=hack_samples,
            seed=seed,
            batch_campaigns=batch_campaigns,
            threads=threads,
            records=records,
        )
        todo = plan(paths[0] if paths else None, model, task, checkpoint, names, ecfg, out)
        if overwrite:
            remove_evaluation(todo.out)
        err_console = Console(stderr=True)
        log = (lambda line: err_console.print(escape(line))) if progress else None
        summary = evaluate_agents(todo.specs, todo.cfg, todo.ecfg, todo.out, log=log)
    except (FileNotFoundError, FileExistsError, ValueError, KeyError) as err:
        _fail(str(err.args[0]) if isinstance(err, KeyError) else str(err))
    if as_json:
        print(json.dumps(summary))
        return
    table = Table(
        title=f"{summary['task']} · budget {summary['budget']} · {summary['campaigns']} held-out "
        f"campaigns x {summary['samples']} samples (K = {summary['samples']})"
    )
    for col in TABLE_COLUMNS:
        table.add_column(col)
    for row in table_rows(summary):
        table.add_row(*(escape(cell) for cell in row))
    console.print(table)
    console.print(f"evaluation written to [bold]{escape(str(todo.out))}[/] (summary.json, PNGs)")


def _coerce(text: str, hint: Any) -> Any:
    """A ``--set`` value as its field's type; ValueError (one line) if it is not one.

    Range and choice checks are :meth:`TrainConfig.validate`'s.
    """
    from labtwin.agents.train_config import literal_values, optional_inner

    if literal_values(hint) is not None:
        return text
    inner = optional_inner(hint)
    if inner is not None:
        if text.lower() in ("none", "null", ""):
            return None
        hint = inner
    if hint is bool:
        words = {"true": True, "1": True, "yes": True, "on": True}
        words.update({"false": False, "0": False, "no": False, "off": False})
        if text.lower() not in words:
            raise ValueError(f"{text!r} is not a boolean (true or false)")
        return words[text.lower()]
    if hint is int:
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"{text!r} is not an integer") from None
    if hint is float:
        try:
            return float(text)
        except ValueError:
            raise ValueError(f"{text!r} is not a number") from None
    return text


def _fail(message: str) -> NoReturn:
    """One line in red, exit code 2 (a usage error, as click's own)."""
    console.print(f"[red]error: {escape(message)}[/]", soft_wrap=True)
    raise typer.Exit(2)


@app.command("plot")
def plot_command(
    run: Annotated[Path, typer.Argument(help="run directory")],
    out: Annotated[Path | None, typer.Option(help="PNG path (default <run>/campaigns.png)")] = None,
) -> None:
    """Plot best score against experiments for every campaign of a run."""
    from labtwin import runs
    from labtwin.rendering.plots import save_campaign_plot

    try:
        loaded = runs.load(run)
    except FileNotFoundError as err:
        _fail(str(err))
    path = save_campaign_plot(loaded, out)
    console.print(f"plot written to [bold]{path}[/]")


@app.command("view")
def view_command(
    run: Annotated[Path, typer.Argument(help="run directory, or a folder of runs")] = Path("runs"),
    port: Annotated[int, typer.Option(min=0, max=65535, help="port (0: a free one)")] = 8765,
    host: Annotated[str, typer.Option(help="address to bind (default: this machine only)")] = (
        "127.0.0.1"
    ),
    open_browser: Annotated[
        bool, typer.Option("--open", help="open the page in a browser")
    ] = False,
) -> None:
    """Serve a live web view of a run (campaigns, training, 3D structures, transcripts)."""
    from labtwin.rendering.viewer import serve

    if not run.is_dir():
        _fail(f"{run} is not a folder")
    try:
        serve(run, host=host, port=port, open_browser=open_browser)
    except OSError as err:  # the port is taken
        _fail(f"cannot serve on {host}:{port}: {err.strerror or err}")


@app.command("report")
def report_command(
    run: Annotated[Path, typer.Argument(help="run directory")],
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="HTML path (default <run>/report.html)")
    ] = None,
) -> None:
    """Write one self-contained HTML file of a run that opens from disk, offline."""
    from labtwin.rendering.report import write_report

    try:
        path = write_report(run, out)
    except FileNotFoundError as err:
        _fail(str(err))
    console.print(f"report written to [bold]{path}[/]")


def _first_sentence(doc: str) -> str:
    paragraph = " ".join(doc.strip().split("\n\n")[0].split())
    return paragraph.split(". ")[0].rstrip(".") + "." if paragraph else ""


def _load(task: str):
    try:
        return load_task(task)
    except KeyError as err:
        _fail(err.args[0])


def main() -> None:
    app()
