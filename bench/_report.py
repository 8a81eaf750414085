"""What every benchmark shares: the ``--markdown FILE`` option and its section.

A benchmark prints its tables as it goes; with ``--markdown FILE`` it also writes one
markdown section to ``FILE``: a ``## title (`command`)`` heading and what it printed (or a
body it builds itself). ``bench/run_all.py`` runs every benchmark this way and puts the
sections together, with the date and the machine, into ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import platform
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path


def add_markdown_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--markdown",
        type=Path,
        default=None,
        metavar="FILE",
        help="also write the results as one markdown section to FILE (bench/run_all.py)",
    )


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``; else what :mod:`platform` says)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def command_line() -> str:
    """How this benchmark was run, without its ``--markdown`` option."""
    args, skip = [], False
    for arg in sys.argv[1:]:
        if skip:
            skip = False
            continue
        if arg == "--markdown":
            skip = True
            continue
        if arg.startswith("--markdown="):
            continue
        args.append(arg)
    script = Path(sys.argv[0])
    name = f"bench/{script.name}" if script.parent.name == "bench" else str(script)
    return " ".join(["python", name, *map(shlex.quote, args)])


def write_section(path: Path | None, title: str, body: str) -> None:
    """Write ``## title (`command`)`` and ``body`` to ``path`` (nothing when None)."""
    if path is None:
        return
    text = f"## {title} (`{command_line()}`)\n\n{body.strip()}\n"
    Path(path).write_text(text)


class _Tee(io.TextIOBase):
    def __init__(self, out: io.TextIOBase) -> None:
        self.out, self.kept = out, io.StringIO()

    def write(self, text: str) -> int:
        self.kept.write(text)
        return self.out.write(text)

    def flush(self) -> None:
        self.out.flush()


@contextlib.contextmanager
def markdown_section(path: Path | None, title: str) -> Iterator[None]:
    """Everything printed inside the block becomes the section's body (and still prints)."""
    if path is None:
        yield
        return
    tee = _Tee(sys.stdout)
    with contextlib.redirect_stdout(tee):
        yield
    write_section(path, title, tee.kept.getvalue())
