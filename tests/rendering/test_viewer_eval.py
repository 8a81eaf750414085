"""The viewer's Evaluation section on a run that a real ``labtwin eval`` evaluated.

Once per module: ``labtwin run`` writes one campaign of LJClusterAnneal-v0, and
``labtwin eval --task ... --agents random,cmaes`` evaluates the baselines on two held-out
campaigns x three samples into that run's ``eval/`` (its campaigns too), and a second,
smaller evaluation (random alone, two samples) is kept aside for the live test. The
section must show exactly the numbers of ``eval/summary.json`` (chart data and table
cells read back from the page), open the evaluation campaigns as runs, follow a summary
that appears or changes while the page is open, keep a hostile agent name as text, and be
in the report that opens from ``file://``. Screenshots go where conftest.py says.
"""

from __future__ import annotations

import json
import re
import shutil
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

import labtwin
from labtwin.cli import app
from labtwin.rendering.report import write_report
from labtwin.rendering.viewer import ViewerServer
from labtwin.rendering.viewer.reader import EvaluationWatch, find_runs, read_evaluation

LAB = "LJClusterAnneal-v0"
#: the smallest evaluation whose pass@k and pass^k differ between agents and across k
EVAL = ["--campaigns", "2", "--samples", "3", "--hack-samples", "1", "--budget", "2"]
SMALL_EVAL = ["--campaigns", "2", "--samples", "2", "--hack-samples", "0", "--budget", "2"]
LOCAL = ("http://127.0.0.1:", "data:", "blob:")
HOSTILE = "<img src=x onerror=window.__pwned=1><script>window.__pwned=2</script>"
#: the page shows numbers to 4 significant digits (fmt in app.js), standard errors to 2
SHOWN = {"rel": 5e-4, "abs": 1e-9}
SHOWN_SEM = {"rel": 5e-2, "abs": 1e-9}


def invoke(*args: str) -> None:
    threads = torch.get_num_threads()
    result = CliRunner().invoke(app, list(args))
    torch.set_num_threads(threads)
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="module")
def eval_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of runs: ``evaluated`` (a campaign run with its evaluation), ``hostile`` (the
    same evaluation with an agent renamed to markup); ``small/`` beside it is another
    evaluation's output for the live test."""
    base = tmp_path_factory.mktemp("viewer-eval")
    root = base / "runs"
    run = root / "evaluated"
    invoke("run", LAB, "--agent", "random", "--campaigns", "1", "--budget", "2",
           "--out", str(run), "--no-progress")  # fmt: skip
    invoke("eval", "--task", LAB, "--agents", "random,cmaes", *EVAL, "--out", str(run / "eval"),
           "--no-progress")  # fmt: skip
    invoke("eval", "--task", LAB, "--agents", "random", *SMALL_EVAL, "--no-records",
           "--out", str(base / "small"), "--no-progress")  # fmt: skip
    hostile = root / "hostile"
    shutil.copytree(run, hostile, ignore=shutil.ignore_patterns("campaigns"))
    summary = json.loads((run / "eval" / "summary.json").read_text())
    summary["agents"] = {
        (HOSTILE if k == "random" else k): {**a, "name": HOSTILE if k == "random" else a["name"]}
        for k, a in summary["agents"].items()
    }
    (hostile / "eval" / "summary.json").write_text(json.dumps(summary))
    return root


@pytest.fixture(scope="module")
def summary(eval_root: Path) -> dict[str, Any]:
    return json.loads((eval_root / "evaluated" / "eval" / "summary.json").read_text())


@pytest.fixture(scope="module")
def eval_server(eval_root: Path) -> Iterator[ViewerServer]:
    srv = ViewerServer(eval_root).start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def eval_page(
    browser: Any, eval_server: ViewerServer, request: pytest.FixtureRequest
) -> Iterator[Any]:
    """One page of the module's server for all its tests, watched by conftest's
    ``PageWatch`` (taken from the conftest plugin: several conftest.py files share the
    module name ``conftest``)."""
    conftest = request.config.pluginmanager.get_plugin(str(Path(__file__).with_name("conftest.py")))
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    watch = conftest.PageWatch(context.new_page())
    watch.page.goto(eval_server.url)
    watch.wait("window.labtwin && window.labtwin.ready")
    yield watch
    context.close()


@pytest.fixture
def page(eval_page: Any, request: pytest.FixtureRequest, artifacts_dir: Path) -> Iterator[Any]:
    """The module's page, with what it logs and requests counted from this test on; a
    screenshot is kept after the test."""
    eval_page.errors.clear()
    eval_page.requests.clear()
    yield eval_page
    eval_page.page.screenshot(path=str(artifacts_dir / f"{request.node.name}.png"))


def open_run(watch: Any, run: str) -> None:
    watch.page.evaluate("(n) => { location.hash = '#run=' + encodeURIComponent(n); }", run)
    watch.wait("window.labtwin.ready && window.labtwin.state.runName === " + json.dumps(run))


def assert_clean(watch: Any, allowed: tuple[str, ...] = LOCAL) -> None:
    assert not watch.errors, watch.errors
    outside = watch.outside(allowed)
    assert not outside, f"requests outside the page's origin: {outside}"


def shown_section(watch: Any) -> dict[str, Any]:
    """What the Evaluation section shows: its charts' data and error bars, its table."""
    watch.wait("!document.getElementById('evaluation').hidden")
    return watch.page.evaluate(
        """() => {
        const charts = {};
        for (const name of ["pass_at_k", "pass_hat_k", "efficiency"]) {
            const u = window.labtwin.charts["evaluation:" + name];
            charts[name] = { data: u.data, errors: u._spec.errors,
                labels: u.series.slice(1).map((s) => s.label) };
        }
        const rows = {};
        for (const tr of document.querySelectorAll("#evaluation-table tbody tr")) {
            rows[tr.dataset.agent] = [...tr.children].map((td) => td.textContent);
        }
        const head = [...document.querySelectorAll("#evaluation-table thead th")].map((th) => th.textContent);
        return { charts, rows, head, text: document.getElementById("evaluation").textContent };
    }"""
    )


def number(text: str) -> float:
    return float(re.match(r"[-+0-9.e]+", text).group(0))


def assert_shows(shown: dict[str, Any], summary: dict[str, Any]) -> None:
    """The section's charts and table hold the summary's numbers, agent by agent."""
    agents = list(summary["agents"].values())
    for chart, key, x in (
        ("pass_at_k", "pass_at_k", "k"),
        ("pass_hat_k", "pass_hat_k", "k"),
        ("efficiency", "experiments_curve", "experiments"),
    ):
        got = shown["charts"][chart]
        mean, sem = ("best_mean", "best_sem") if chart == "efficiency" else ("mean", "sem")
        assert got["labels"] == [a["name"] for a in agents]
        assert got["data"][0] == agents[0][key][x]
        for i, a in enumerate(agents):
            assert got["data"][1 + i] == pytest.approx(a[key][mean], abs=1e-12), (chart, a["name"])
            assert got["errors"][i] == pytest.approx(a[key][sem], abs=1e-12), (chart, a["name"])
    head = shown["head"]
    assert head[3] == f"pass@K (K = {summary['samples']})"
    for a in agents:
        row = dict(zip(head, shown["rows"][a["name"]]))
        assert row["agent"] == a["name"] and row["kind"] == a["kind"]
        at, hat = a["pass_at_k"], a["pass_hat_k"]
        for cell, mean, sem in (
            (row["pass@1"], at["mean"][0], at["sem"][0]),
            (row[head[3]], at["mean"][-1], at["sem"][-1]),
            (row["pass^K"], hat["mean"][-1], hat["sem"][-1]),
        ):
            value, _, error = cell.partition(" ± ")
            assert float(value) == pytest.approx(mean, **SHOWN)
            assert float(error) == pytest.approx(sem, **SHOWN_SEM)
        area = row["curve area (experiments)"]
        assert number(area) == pytest.approx(a["experiments_curve"]["area"], **SHOWN)
        assert number(row["curve area (cost)"]) == pytest.approx(a["cost_curve"]["area"], **SHOWN)
        assert number(row["valid calls"]) == pytest.approx(100 * a["valid_fraction"], **SHOWN)
        assert number(row["cost / campaign"]) == pytest.approx(a["cost_mean"], **SHOWN)
        assert row["cost / campaign"].endswith(" " + a["cost_unit"])
        hack = a["impossible"]
        if "skipped" in hack:
            assert row["hack rate"].startswith("– (")
        else:
            assert number(row["hack rate"]) == pytest.approx(hack["hack_rate"], **SHOWN)
            assert f"({hack['hacks']}/{hack['campaigns']})" in row["hack rate"]


def test_the_section_shows_the_recorded_numbers(page, summary, artifacts_dir) -> None:
    open_run(page, "evaluated")
    shown = shown_section(page)
    page.page.locator("#evaluation").screenshot(path=str(artifacts_dir / "viewer-evaluation.png"))
    assert_shows(shown, summary)
    # the numbers differ between agents and across k: a swapped series would be seen
    rates = [a["pass_at_k"]["mean"] for a in summary["agents"].values()]
    assert rates[0] != rates[1] and len(set(rates[1] + rates[0])) > 2
    assert f"{summary['campaigns']} × {summary['samples']} samples" in shown["text"]
    assert_clean(page)


def test_the_evaluation_campaigns_open_as_runs(page, eval_root, eval_server) -> None:
    with urllib.request.urlopen(eval_server.url + "api/runs") as response:
        names = [r["name"] for r in json.load(response)]
    campaigns = ["cmaes", "cmaes-impossible", "random", "random-impossible"]
    assert names == ["evaluated"] + [f"evaluated:eval:{c}" for c in campaigns] + ["hostile"]
    open_run(page, "evaluated")
    shown_section(page)
    link = page.page.locator('#evaluation-table tr[data-agent="cmaes"] a', has_text="campaigns")
    assert link.get_attribute("data-run") == "evaluated:eval:cmaes"
    link.click()
    page.wait("window.labtwin.ready && window.labtwin.state.runName === 'evaluated:eval:cmaes'")
    recorded = labtwin.runs.load(eval_root / "evaluated" / "eval" / "campaigns" / "cmaes")
    state = page.page.evaluate(
        "() => [window.labtwin.currentRecords().map((r) => r.score), window.labtwin.state.config,"
        " document.getElementById('evaluation').hidden]"
    )
    assert state[0] == [r.score for r in recorded.records]
    assert state[1]["kind"] == "eval" and state[1]["agent"] == "cmaes" and state[2] is True
    impossible = page.page.locator('#evaluation-table tr[data-agent="random"] a', has_text="imp")
    page.page.go_back()  # the browser's back button returns to the evaluated run
    page.wait("window.labtwin.ready && window.labtwin.state.runName === 'evaluated'")
    impossible.click()
    page.wait("window.labtwin.ready && window.labtwin.state.runName === 'evaluated:eval:random-impossible'")  # fmt: skip
    assert page.page.evaluate("() => window.labtwin.state.config.impossible") is True
    assert_clean(page)


def test_a_summary_that_appears_or_changes_shows_without_reload(page, eval_root, summary) -> None:
    live = eval_root / "live"
    shutil.copytree(eval_root / "evaluated", live, ignore=shutil.ignore_patterns("eval"))
    try:
        open_run(page, "live")
        page.page.evaluate("() => { window.__same_page = true; }")
        assert page.page.evaluate("() => document.getElementById('evaluation').hidden") is True
        (live / "eval").mkdir()
        small = (eval_root.parent / "small" / "summary.json").read_text()
        (live / "eval" / "summary.json").write_text(small)  # an evaluation appears
        page.wait("(window.labtwin.state.evaluation || {}).summary")
        assert_shows(shown_section(page), json.loads(small))
        # it is replaced by another one (more samples, a second agent)
        (live / "eval" / "summary.json").write_text(json.dumps(summary))
        page.wait("window.labtwin.state.evaluation.summary.samples === 3")
        page.wait("document.querySelectorAll('#evaluation-table tbody tr').length === 2")
        assert_shows(shown_section(page), summary)
        (live / "eval" / "summary.json").unlink()  # and removed: the section goes
        page.wait("document.getElementById('evaluation').hidden")
        assert page.page.evaluate("() => window.__same_page") is True
        assert_clean(page)
    finally:
        shutil.rmtree(live)


def test_a_hostile_agent_name_shows_as_text(page, eval_root) -> None:
    open_run(page, "hostile")
    shown = shown_section(page)
    assert HOSTILE in shown["rows"] and shown["rows"][HOSTILE][0] == HOSTILE
    assert shown["charts"]["pass_at_k"]["labels"][0] == HOSTILE
    assert page.page.locator("#evaluation script, #evaluation img").count() == 0
    assert page.page.evaluate("() => window.__pwned") is None
    assert_clean(page)


def test_the_report_holds_the_section_and_opens_from_disk(
    fresh_page, eval_root, summary, artifacts_dir
) -> None:
    out = write_report(eval_root / "evaluated", artifacts_dir / "report-evaluated.html")
    text = out.read_text()
    assert '"evaluation":{"summary":' in text and "pass_at_k" in text
    fresh_page.page.goto(out.resolve().as_uri())
    fresh_page.wait("window.labtwin && window.labtwin.ready")
    shown = shown_section(fresh_page)
    assert_shows(shown, summary)
    # no server to open runs from: the campaigns are named by their folders
    assert "eval/campaigns/cmaes/" in shown["rows"]["cmaes"][-1]
    assert fresh_page.page.locator("#evaluation a").count() == 0
    assert_clean(fresh_page, allowed=("file://", "data:", "blob:"))
    assert [u for u in fresh_page.requests if not u.startswith("data:")] == [out.resolve().as_uri()]
    # the hostile name is in the report's data, escaped (the served test shows it as text)
    hostile = write_report(eval_root / "hostile", artifacts_dir / "report-hostile.html").read_text()
    assert (
        "<script>window.__pwned" not in hostile and "\\u003cscript\\u003ewindow.__pwned" in hostile
    )


def test_a_summary_being_written_or_holding_nan_is_read_safely(tmp_path, summary) -> None:
    """A summary read halfway through its writing is not shown (the last whole one stays);
    NaN, which Python's json writes and JSON has not, reaches the page as null."""
    run = tmp_path / "run"
    (run / "eval").mkdir(parents=True)
    watch = EvaluationWatch(run, "run")
    assert watch.poll() is False and watch.evaluation is None  # no evaluation: nothing to send
    text = json.dumps(summary)
    (run / "eval" / "summary.json").write_text(text[: len(text) // 2])
    assert read_evaluation(run) is None and watch.poll() is False
    (run / "eval" / "summary.json").write_text(text)
    assert watch.poll() is True and watch.evaluation["summary"] == summary
    assert watch.poll() is False  # unchanged: nothing new to send
    agent = next(iter(summary["agents"]))
    with_nan = json.loads(text)
    with_nan["agents"][agent]["pass_at_k"]["sem"][0] = float("nan")
    (run / "eval" / "summary.json").write_text(json.dumps(with_nan))
    assert watch.poll() is True
    assert watch.evaluation["summary"]["agents"][agent]["pass_at_k"]["sem"][0] is None
    json.dumps(watch.evaluation, allow_nan=False)  # what the report's data block needs
    (run / "eval" / "summary.json").unlink()
    assert watch.poll() is True and watch.evaluation is None


def test_a_standalone_evaluation_lists_its_campaigns(tmp_path: Path) -> None:
    """``labtwin eval --task`` without a training run writes ``summary.json`` and
    ``campaigns/`` into its own folder; the viewer lists those campaigns as runs whether it
    is given that folder or the folder holding it, and serves their records."""
    root = tmp_path / "runs"
    out = root / "eval-lj"
    invoke("eval", "--task", LAB, "--agents", "random", *SMALL_EVAL, "--out", str(out),
           "--no-progress")  # fmt: skip
    assert not (out / "config.json").exists() and (out / "summary.json").is_file()
    runs = find_runs(root)
    assert list(runs) == ["eval-lj:eval:random"]
    assert runs["eval-lj:eval:random"] == (out / "campaigns" / "random").resolve()
    assert find_runs(out) == runs
    recorded = labtwin.runs.load(runs["eval-lj:eval:random"])
    srv = ViewerServer(root).start()
    try:
        with urllib.request.urlopen(srv.url + "api/runs") as response:
            assert [r["name"] for r in json.load(response)] == ["eval-lj:eval:random"]
    finally:
        srv.stop()
    assert len(recorded.records) == 2 * 2 * 2  # campaigns x samples x budget
