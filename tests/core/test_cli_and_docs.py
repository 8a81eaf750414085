"""The command line and the README's examples, run for real."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import labtwin
from labtwin.cli import app

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def test_tasks_json_lists_every_lab() -> None:
    result = runner.invoke(app, ["tasks", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [r["id"] for r in rows] == labtwin.list_tasks()


def test_help_says_what_each_command_does_in_the_users_words() -> None:
    """``labtwin --help`` names every command with its summary, and its opening says what
    labtwin is, without the developers' notes of the module docstring (import rules)."""
    result = runner.invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    for command in app.registered_commands:
        summary = command.callback.__doc__.strip().splitlines()[0]
        assert command.name in text and summary in text, command.name
    assert "reinforcement-learning environments" in text
    assert "import" not in text and "``" not in text


def test_every_lab_summary_is_one_plain_sentence() -> None:
    """``labtwin tasks`` shows each lab's first docstring sentence to users: a sentence,
    without the source's cross-references (Sphinx roles, "module doc")."""
    rows = json.loads(runner.invoke(app, ["tasks", "--json"]).output)
    for row in rows:
        summary = row["summary"]
        assert summary.endswith("."), row["id"]
        assert ":data:" not in summary and "``" not in summary, row["id"]
        assert "module doc" not in summary, row["id"]


def test_tasks_table_fits_a_narrow_terminal() -> None:
    """At 80 columns ``labtwin tasks`` leaves out the knob names (they squeezed each summary
    into a column a word or two wide) and says where to find them; from 110 it lists them."""
    import os
    import subprocess
    import sys

    def table(columns: int) -> str:
        env = {**os.environ, "COLUMNS": str(columns)}
        command = [sys.executable, "-c", "from labtwin.cli import main; main()", "tasks"]
        return subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout

    narrow, wide = table(80), table(160)
    assert max(map(len, narrow.splitlines())) <= 80
    assert "┃ experiment" not in narrow and "catalyst_mol_pct" not in narrow
    assert "labtwin describe <id>" in narrow
    assert "┃ experiment" in wide and "catalyst_mol_pct" in wide
    assert narrow.count("labtwin/") == len(labtwin.list_tasks())  # one row a lab


def test_describe_shows_schema_and_reward() -> None:
    result = runner.invoke(app, ["describe", "BatchReactor-v1", "--json"])
    info = json.loads(result.output)
    assert info["experiment_schema"]["properties"]["temperature_K"]["maximum"] == 380
    assert "yield" in info["reward"]
    text = runner.invoke(app, ["describe", "BatchReactor-v1"]).output
    assert "catalyst_mol_pct" in text and "[K]" in text


def test_unknown_lab_is_a_clean_error() -> None:
    result = runner.invoke(app, ["describe", "NoSuchLab-v0"])
    assert result.exit_code == 2 and "unknown lab" in result.output


def test_run_writes_a_run_and_a_summary(tmp_path) -> None:
    out = tmp_path / "run"
    result = runner.invoke(
        app,
        [
            "run",
            "BatchReactor-v1",
            "--agent",
            "random",
            "--campaigns",
            "2",
            "--budget",
            "3",
            "--seed",
            "5",
            "--out",
            str(out),
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "best measured outcome per campaign" in result.output
    run = labtwin.runs.load(out)
    assert run.config["seed"] == 5 and len(run.records) == 6 and len(run.campaigns) == 2
    assert (out / "campaigns.png").stat().st_size > 1000
    plot = runner.invoke(app, ["plot", str(out), "--out", str(tmp_path / "p.png")])
    assert plot.exit_code == 0 and (tmp_path / "p.png").exists()


def _python_blocks(markdown: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", markdown, flags=re.S)


def test_readme_examples_run(tmp_path) -> None:
    """Every python block of the README runs as written, in a fresh interpreter."""
    blocks = _python_blocks((ROOT / "README.md").read_text())
    assert len(blocks) >= 2
    for i, code in enumerate(blocks):
        script = tmp_path / f"block{i}.py"
        script.write_text(code)
        done = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path
        )
        assert done.returncode == 0, f"README block {i} failed:\n{done.stderr[-3000:]}"
        assert done.stdout.strip(), f"README block {i} printed nothing"


def test_the_third_party_lab_of_the_concepts_page_keeps_the_contract(tmp_path) -> None:
    """docs/concepts.md's example lab passes check_lab and its calibration, as written."""
    blocks = _python_blocks((ROOT / "docs" / "concepts.md").read_text())
    (code,) = [b for b in blocks if "class Extraction" in b]
    script = tmp_path / "extraction_lab.py"
    script.write_text(code + "\n\ntest_extraction_keeps_the_labtwin_contract()\nprint('ok')\n")
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


def test_readme_commands_match_ci() -> None:
    """.ci/run runs the README's test command verbatim."""
    readme = (ROOT / "README.md").read_text()
    commands = re.findall(r"```bash\n(.*?)\n```", readme, flags=re.S)
    test_command = next(c for c in commands if "pytest" in c)
    assert test_command in (ROOT / ".ci" / "run").read_text()


def test_examples_run_in_smoke_mode(tmp_path) -> None:
    for script in sorted((ROOT / "examples").glob("*.py")):
        done = subprocess.run(
            [sys.executable, str(script), "--smoke", "--out", str(tmp_path / script.stem)],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=tmp_path,
        )
        assert done.returncode == 0, f"{script.name} failed:\n{done.stderr[-3000:]}"


@pytest.mark.parametrize(
    "args, message",
    [
        (["run", "BatchReactor-v1", "--agent", "nope"], "unknown agent 'nope'"),
        (["run", "Nope-v0"], "unknown lab"),
        (["run", "BatchReactor-v1", "--seed", "-1"], "greater than or equal to 0"),
        (["run", "ReactorProtocol-v1", "--agent", "cmaes"], "needs a lab with a numeric view"),
        (["plot", "/nonexistent/run"], "not a labtwin run"),
    ],
)
def test_bad_cli_input_is_one_line_and_exit_2(args, message, tmp_path) -> None:
    result = CliRunner().invoke(app, [*args, "--no-progress"] if args[0] == "run" else args)
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output


def test_run_refuses_an_existing_run_directory(tmp_path) -> None:
    out = tmp_path / "run"
    args = ["run", "BatchReactor-v1", "--campaigns", "1", "--budget", "1", "--out", str(out)]
    assert CliRunner().invoke(app, [*args, "--no-progress"]).exit_code == 0
    again = CliRunner().invoke(app, [*args, "--no-progress"])
    assert again.exit_code == 2 and "already holds a run" in again.output
