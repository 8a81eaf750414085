"""The self-contained report, the notebook views and the transcripts stream, without a browser."""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
from pathlib import Path

import numpy as np
import viewer_runs
from typer.testing import CliRunner

import labtwin
from labtwin.cli import app
from labtwin.rendering.report import report_data, write_report
from labtwin.rendering.viewer.page import SCRIPTS, inline_page, json_for_html
from labtwin.runs import RunStore


def test_the_report_is_one_file_that_loads_nothing(viewer_root: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["report", str(viewer_root / "train-chat"), "-o", str(tmp_path / "r.html")]
    )
    assert result.exit_code == 0, result.output
    text = (tmp_path / "r.html").read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", text)
    assert "<link" not in text.replace('<link rel="icon" href="data:,">', "")
    # the policy lets nothing load; scripts run only by their hashes
    csp = html.unescape(
        re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', text).group(1)
    )
    assert "default-src 'none'" in csp and "unsafe-inline" not in csp.split("style-src")[0]
    for body in re.findall(r"<script>(.*?)</script>", text, flags=re.S):
        digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in csp


def test_run_text_cannot_close_the_data_block(viewer_root: Path) -> None:
    data = report_data(viewer_root / "train-chat")
    text = inline_page(data, "t")
    # the reply with <script> is in the data, escaped: every </script> closes a real block
    block = re.search(
        r'<script type="application/json" id="labtwin-data">(.*?)</script>', text, re.S
    ).group(1)
    assert "<" not in block and ">" not in block
    assert viewer_runs.SCRIPT_REPLY in json.dumps(json.loads(block))
    assert text.count("</script>") == len(SCRIPTS) + 1  # the data block and the scripts
    assert (
        json_for_html({"x": "</script><b>&"})
        == '{"x":"\\u003c/script\\u003e\\u003cb\\u003e\\u0026"}'
    )


def test_the_report_holds_every_line_and_the_structures(viewer_root: Path, tmp_path: Path) -> None:
    run = labtwin.runs.load(viewer_root / "lj-campaigns")
    data = report_data(run.path)
    assert data["lines"]["records"] == run.record_lines
    keys = {r["measurement"]["artifacts"]["structure_positions"] for r in run.record_lines}
    assert set(data["structures"]) == keys and data["structures_omitted"] == 0
    small = report_data(run.path, max_structure_numbers=13 * 3 * 8 * 4)  # room for a few
    assert 0 < len(small["structures"]) < len(keys)
    assert small["structures_omitted"] == len(keys) - len(small["structures"])
    best = max(run.record_lines[:3], key=lambda r: r["score"])  # campaign 0's best goes first
    assert best["measurement"]["artifacts"]["structure_positions"] in small["structures"]
    out = write_report(run.path, tmp_path / "sub" / "report.html")
    assert out.is_file() and out.stat().st_size > 500_000  # the libraries are inside


def test_runs_campaigns_measurements_and_labs_show_themselves_inline(viewer_root: Path) -> None:
    run = labtwin.runs.load(viewer_root / "train-chat")
    page = run._repr_html_()
    assert page.startswith("<iframe") and 'sandbox="allow-scripts"' in page
    inner = html.unescape(re.search(r'srcdoc="([^"]*)"', page).group(1))
    assert 'id="labtwin-data"' in inner and "<script>window.__pwned" not in inner

    task = labtwin.load_task(viewer_runs.LAB, budget=2)
    table = task._repr_html_()
    assert (
        "start_temperature" in table and "energy_above_minimum" in table and "<script" not in table
    )

    env = labtwin.LabEnv(task)
    env.reset(seed=3)
    env.step(task.random_experiment(np.random.default_rng(0)).model_dump())
    campaign_page = env.campaign._repr_html_()
    inner = html.unescape(re.search(r'srcdoc="([^"]*)"', campaign_page).group(1))
    data = json.loads(re.search(r'id="labtwin-data">(.*?)</script>', inner, re.S).group(1))
    assert len(data["lines"]["records"]) == 1
    if data["structures"]:  # where the lab records its structure, it is inside
        assert len(data["structures"]) == 1

    plain = labtwin.Measurement("ok", {"x": labtwin.Value(1.0, "<b>u</b>", 0.1)})
    assert "&lt;b&gt;u&lt;/b&gt;" in plain._repr_html_() and "<iframe" not in plain._repr_html_()
    with_structure = labtwin.Measurement("ok", artifacts=viewer_runs.crystal_structure())
    assert with_structure._repr_html_().startswith("<iframe")


def test_anything_else_has_no_inline_html() -> None:
    from labtwin.display import repr_html

    assert repr_html(object()) is None


def test_transcripts_are_a_stream_of_the_run(tmp_path: Path) -> None:
    """One line per LLM campaign; written on demand (other runs have no file); a resumed run
    that runs a campaign again supersedes its transcript, as it does its records."""
    task = labtwin.load_task(viewer_runs.LAB, budget=1)
    messages = [{"role": "system", "content": "brief"}, {"role": "assistant", "content": "<x>"}]
    with RunStore(tmp_path / "run") as store:
        batch = labtwin.CampaignBatch(task, 1, recorder=store)
        batch.reset([0], [1])
        store.log_transcript(0, messages, [0.5], phase="train")
    assert not (tmp_path / "plain" / "transcripts.jsonl").exists()
    run = labtwin.runs.load(tmp_path / "run")
    t = run.transcripts[0]
    assert t["messages"] == messages and t["rewards"] == [0.5] and t["phase"] == "train"
    assert t["uid"] == run.campaigns[0].start["uid"]
    with RunStore(tmp_path / "run", resume=True) as store:
        labtwin.CampaignBatch(task, 1, recorder=store).reset([0], [1])  # campaign 0 again
        store.log_transcript(0, messages[:1], [0.0])
    again = labtwin.runs.load(tmp_path / "run").transcripts[0]
    assert again["messages"] == messages[:1]
    with RunStore(tmp_path / "plain"):
        pass
    assert not (tmp_path / "plain" / "transcripts.jsonl").exists()
