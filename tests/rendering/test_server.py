"""The viewer's HTTP API, asked with raw requests (paths exactly as sent, no client clean-up)."""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import labtwin
from labtwin.rendering.viewer.page import SCRIPTS, STYLES


def get(server, path: str, headers: dict | None = None, timeout: float = 10.0):
    conn = http.client.HTTPConnection(server.host, server.port, timeout=timeout)
    conn.request("GET", path, headers={"Host": f"127.0.0.1:{server.port}", **(headers or {})})
    response = conn.getresponse()
    body = response.read()
    conn.close()
    return response.status, dict(response.getheaders()), body


def events(
    server, run: str, n: int, last_event_id: str | None = None
) -> list[tuple[str, str, dict]]:
    """The first ``n`` events of a run's event stream: (event, id, data)."""
    conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
    headers = {"Host": f"127.0.0.1:{server.port}"}
    if last_event_id:
        headers["Last-Event-ID"] = last_event_id
    conn.request("GET", f"/api/runs/{run}/events", headers=headers)
    response = conn.getresponse()
    assert response.status == 200
    assert response.getheader("content-type").startswith("text/event-stream")
    out, fields = [], {}
    while len(out) < n:
        line = response.fp.readline().decode().rstrip("\n")
        if line == "":
            if "event" in fields:
                out.append((fields["event"], fields.get("id"), json.loads(fields["data"])))
            fields = {}
        elif not line.startswith(":"):
            key, _, value = line.partition(": ")
            fields[key] = value
    conn.close()
    return out


def test_the_page_and_its_assets_are_served_with_a_strict_policy(server) -> None:
    status, headers, body = get(server, "/")
    assert status == 200
    page = body.decode()
    assert "http://" not in page and "https://" not in page  # no CDN, no other host
    for asset in SCRIPTS + STYLES:
        assert f'"assets/{asset}"' in page
        status, asset_headers, _ = get(server, f"/assets/{asset}")
        assert status == 200 and asset_headers["x-content-type-options"] == "nosniff"
    csp = headers["content-security-policy"]
    assert (
        "default-src 'none'" in csp and "script-src 'self'" in csp and "connect-src 'self'" in csp
    )
    assert "unsafe-eval" not in csp


def test_the_vendored_libraries_carry_their_licences() -> None:
    from labtwin.rendering.viewer.page import ASSETS

    assert (
        "BSD" in (ASSETS / "3dmol" / "LICENSE").read_text()
        or "Redistribution" in (ASSETS / "3dmol" / "LICENSE").read_text()
    )
    assert "MIT" in (ASSETS / "uplot" / "LICENSE").read_text()
    # the app itself loads nothing by URL: no absolute URL in a fetch or an EventSource
    app = (ASSETS / "viewer" / "app.js").read_text()
    assert not re.search(r"(fetch|EventSource)\(\s*[\"']https?:", app)
    assert "http://" not in app and "https://" not in app


def test_every_asset_is_package_data() -> None:
    """setup.py's patterns for labtwin.rendering match every file under assets/."""
    import fnmatch

    from labtwin.rendering.viewer.page import ASSETS, asset_files

    setup = (Path(__file__).resolve().parents[2] / "setup.py").read_text()
    patterns = re.search(r'"labtwin.rendering": \[([^\]]*)\]', setup).group(1)
    patterns = [p.strip().strip('"') for p in patterns.split(",") if p.strip()]
    for rel in asset_files():
        path = f"assets/{rel}"
        assert any(
            fnmatch.fnmatch(path, p) and path.count("/") == p.count("/") for p in patterns
        ), f"{path} is not package data"
    assert (ASSETS / "README.md").is_file()


def test_runs_are_listed(server) -> None:
    status, _, body = get(server, "/api/runs")
    runs = {r["name"]: r for r in json.loads(body)}
    assert runs["train-chat"]["kind"] == "train" and runs["lj-campaigns"]["bytes"]["records"] > 0


def test_the_event_stream_sends_every_line_then_resumes_where_it_was(server, viewer_root) -> None:
    run = labtwin.runs.load(viewer_root / "train-chat")
    got = events(server, "train-chat", 6)
    assert got[0][0] == "config" and got[0][2]["kind"] == "train"
    streams = {data["stream"]: data["lines"] for event, _, data in got[1:] if event == "lines"}
    assert streams["records"] == run.record_lines
    assert streams["metrics"] == run.metrics
    assert len(streams["transcripts"]) == len(run.transcripts)
    assert got[-1][0] == "synced"
    # a browser that reconnects with the last id it saw gets nothing twice
    last_id = [i for _, i, _ in got if i][-1]
    again = events(server, "train-chat", 2, last_event_id=last_id)
    assert [e for e, _, _ in again] == ["config", "synced"]


def test_a_structure_comes_from_its_artifact_paths(server, viewer_root) -> None:
    line = labtwin.runs.load(viewer_root / "structures").record_lines[1]
    a = line["measurement"]["artifacts"]
    query = "&".join(f"{k}={a['structure_' + k]}" for k in ("numbers", "positions", "cell"))
    status, _, body = get(server, f"/api/runs/structures/structure?{query}")
    assert status == 200
    data = json.loads(body)
    assert len(data["frames"]) == 5 and len(data["cells"]) == 5 and set(data["numbers"]) == {29}


TRAVERSALS = [
    "/api/runs/structures/files/../../../../etc/passwd",
    "/api/runs/structures/files/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
    "/api/runs/structures/files/..%2f..%2f..%2fetc%2fpasswd",
    "/api/runs/structures/files//etc/passwd",
    "/api/runs/structures/files/%2fetc%2fpasswd",
    "/api/runs/structures/files/artifacts/../../train-chat/config.json",
    "/api/runs/structures/files/outside-link/passwd",  # a symlink out of the run
    "/api/runs/..%2f..%2f..%2fetc/files/passwd",
    "/api/runs/%2e%2e/files/passwd",
    "/assets/../viewer/app.py",
    "/assets/%2e%2e/viewer/app.py",
    "/assets/..%2fviewer%2fapp.py",
    "/assets//etc/passwd",
    "/api/runs/structures/structure?numbers=../config.json&positions=../config.json",
    "/api/runs/structures/structure?numbers=/etc/passwd&positions=/etc/passwd",
    "/api/runs/structures/structure?numbers=artifacts/%2e%2e/%2e%2e/x.npy&positions=a.npy",
]


def test_nothing_outside_the_run_or_the_assets_is_served(server, viewer_root, tmp_path) -> None:
    link = viewer_root / "structures" / "outside-link"
    os.symlink("/etc", link)
    try:
        for path in TRAVERSALS:
            status, _, body = get(server, path)
            assert status in (400, 404), (path, status)
            assert b"root:" not in body and b"import" not in body, path
    finally:
        link.unlink()
    # inside the run, files are served (and downloads are never rendered as pages)
    status, headers, body = get(server, "/api/runs/structures/files/config.json")
    assert status == 200 and json.loads(body)["task"] == "structures"
    assert headers["content-type"].startswith("text/plain")


def test_requests_for_another_host_are_refused(server) -> None:
    """A page of another site that resolves its name to 127.0.0.1 (DNS rebinding) gets nothing."""
    status, _, _ = get(server, "/api/runs", headers={"Host": "evil.example"})
    assert status == 400


def test_the_server_binds_to_loopback_and_a_free_port(server) -> None:
    assert server.host == "127.0.0.1" and server.port > 0
    assert server.url == f"http://127.0.0.1:{server.port}/"


def test_labtwin_view_prints_its_url_and_serves(viewer_root) -> None:
    cmd = [sys.executable, "-c", "from labtwin.cli import main; main()"]
    proc = subprocess.Popen(
        [*cmd, "view", str(viewer_root / "structures"), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        line = ""
        deadline = time.monotonic() + 60
        while "http://" not in line:
            assert time.monotonic() < deadline and proc.poll() is None, line
            line = proc.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert url, line
        with socket.create_connection(("127.0.0.1", int(url.group(1))), timeout=10) as sock:
            sock.sendall(b"GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            reply = b""
            while chunk := sock.recv(65536):
                reply += chunk
        assert reply.startswith(b"HTTP/1.1 200") and b'"structures"' in reply
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.parametrize("args, message", [(["view", "/no/such/run"], "is not a folder")])
def test_view_refuses_a_missing_folder(args, message) -> None:
    from typer.testing import CliRunner

    from labtwin.cli import app

    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and message in result.output
