"""Dependencies point one way: labtwin <- simulators <- tasks <- agents; rendering reads the core.

Checked on the source with ``ast`` (every import statement, including lazy
ones inside functions), since the subpackages live in separate top-level
folders that import-graph tools do not see as one package.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# folder -> labtwin subpackages it must not import
FORBIDDEN = {
    "labtwin": {"simulators", "tasks", "agents", "rendering"},
    "simulators": {"tasks", "agents", "rendering"},
    "tasks": {"agents", "rendering"},
    "agents": {"rendering"},
    "rendering": {"simulators", "tasks", "agents"},
}
# the CLI is the application layer: it composes subpackages (lazily)
EXEMPT = {"labtwin/cli.py": {"rendering", "agents"}}


def imported_subpackages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "labtwin" and len(parts) > 1:
                found.add(parts[1])
    return found


@pytest.mark.parametrize("folder", sorted(FORBIDDEN))
def test_layers(folder: str) -> None:
    violations = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        bad = (imported_subpackages(path) & FORBIDDEN[folder]) - EXEMPT.get(rel, set())
        if bad:
            violations.append(f"{rel} imports labtwin.{', labtwin.'.join(sorted(bad))}")
    assert not violations, "\n".join(violations)


def test_checker_sees_lazy_imports(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from labtwin.tasks.reactor import BatchReactor\n")
    assert imported_subpackages(module) == {"tasks"}
