"""Dependencies point one way: the provider never imports the lab; the lab may import the provider.

The provider is what an Airflow deployment or a cluster runs (`dispatch/`, `kueue/`, `hooks/`, `operators/`,
`sensors/`, `triggers/`, the `dispatch` command's provider commands and the top-level helpers). The lab side is
`lab/` and the command modules that drive it, `cli_lab.py` and `cli_lab_controls.py` (`dispatch lab`) and `demo.py`
(`dispatch demo`).
The only seam is `cli.py`, the `dispatch` command group itself: it names the two lab-side command modules, inside
functions, and nothing else of the lab side (docs/architecture.md, "The import rule").

Every import counts: at module level, inside functions, under `TYPE_CHECKING`, relative ones, and
`importlib.import_module("...")` with a literal name.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "airflow_provider_dispatch"
LAB = f"{PACKAGE}.lab"
#: the modules outside `lab/` that belong to the lab side: they start and drive a lab
LAB_SIDE_MODULES = frozenset({f"{PACKAGE}.cli_lab", f"{PACKAGE}.cli_lab_controls", f"{PACKAGE}.demo"})
#: the one seam: the `dispatch` group registers `dispatch lab` and runs `dispatch demo`, importing their modules
#: inside functions (never the lab itself)
SEAM = frozenset({(f"{PACKAGE}.cli", f"{PACKAGE}.cli_lab"), (f"{PACKAGE}.cli", f"{PACKAGE}.demo")})


@dataclass(frozen=True)
class Import:
    target: str
    line: int
    in_function: bool


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_lab_side(module: str) -> bool:
    return module == LAB or module.startswith(LAB + ".") or module in LAB_SIDE_MODULES


def _absolute(module: str, is_package: bool, level: int, name: str | None) -> str:
    if level == 0:
        return name or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, name] if name else base)


def imports_of(path: Path, root: Path = ROOT) -> Iterator[Import]:
    """Every module `path` imports, with where: `from a import b` yields `a` and `a.b` (b may be a module)."""
    module = module_name(path, root)
    tree = ast.parse(path.read_text(), filename=str(path))
    functions: list[tuple[int, int]] = [
        (node.lineno, node.end_lineno or node.lineno)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
    ]

    def inside(node: ast.AST) -> bool:
        line = getattr(node, "lineno", 0)
        return any(start <= line <= end for start, end in functions)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(alias.name, node.lineno, inside(node))
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, path.name == "__init__.py", node.level, node.module)
            yield Import(base, node.lineno, inside(node))
            for alias in node.names:
                yield Import(f"{base}.{alias.name}", node.lineno, inside(node))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
            in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield Import(node.args[0].value, node.lineno, inside(node))


def crossings(path: Path, root: Path = ROOT) -> list[str]:
    """The imports of one provider module that reach the lab side and are not the seam."""
    module = module_name(path, root)
    found: dict[int, str] = {}  # one line per import statement: its first lab-side name
    for imported in imports_of(path, root):
        if not is_lab_side(imported.target) or imported.line in found:
            continue
        if (module, imported.target) in SEAM and imported.in_function:
            continue
        where = "inside a function" if imported.in_function else "at module level"
        found[imported.line] = f"{path.relative_to(root)}:{imported.line} imports {imported.target} ({where})"
    return list(found.values())


PROVIDER_MODULES = sorted(path for path in (ROOT / PACKAGE).rglob("*.py") if not is_lab_side(module_name(path)))


def test_the_provider_and_the_lab_are_both_found() -> None:
    lab_side = [path for path in (ROOT / PACKAGE).rglob("*.py") if is_lab_side(module_name(path))]
    assert len(PROVIDER_MODULES) > 50, PROVIDER_MODULES
    assert len(lab_side) > 50, lab_side
    assert {module_name(p) for p in PROVIDER_MODULES} >= {
        f"{PACKAGE}.cli",
        f"{PACKAGE}.kueue.controller",
        f"{PACKAGE}.dispatch.programs",
        f"{PACKAGE}.triggers.watch",
    }


@pytest.mark.parametrize("path", PROVIDER_MODULES, ids=lambda p: str(p.relative_to(ROOT / PACKAGE)))
def test_a_provider_module_never_imports_the_lab(path: Path) -> None:
    found = crossings(path)
    assert not found, "the provider imports the lab side:\n" + "\n".join(found)


def test_the_seam_is_used_as_declared() -> None:
    """The allowed imports exist (a stale allowance would hide a new crossing elsewhere in `cli.py`)."""
    cli = ROOT / PACKAGE / "cli.py"
    seen = {(module_name(cli), i.target) for i in imports_of(cli) if i.in_function}
    assert seen >= SEAM


@pytest.mark.parametrize(
    ("source", "crossing"),
    [
        ("from airflow_provider_dispatch.lab.simulated.cluster import ClusterContext\n", "at module level"),
        ("def f():\n    from airflow_provider_dispatch.lab import drill\n", "inside a function"),
        ("import airflow_provider_dispatch.lab.runtime\n", "at module level"),
        ("from airflow_provider_dispatch import lab\n", "at module level"),
        ("from ..lab.scenario import Scenario\n", "at module level"),
        ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..lab import runtime\n", "at module level"),
        (
            "import importlib\ndef f():\n    "
            "importlib.import_module('airflow_provider_dispatch.lab.scenario.presets')\n",
            "inside",
        ),
        ("from airflow_provider_dispatch.demo import run_demo\n", "at module level"),
        ("def f():\n    from airflow_provider_dispatch.cli_lab import lab\n", "inside a function"),
    ],
)
def test_the_check_sees_every_kind_of_crossing(tmp_path: Path, source: str, crossing: str) -> None:
    """A crossing written any of these ways, in a provider module (here `kueue/`), is reported."""
    package = tmp_path / PACKAGE / "kueue"
    package.mkdir(parents=True)
    module = package / "probe.py"
    module.write_text(source)
    found = crossings(module, root=tmp_path)
    assert found, source
    assert all(crossing in line for line in found), found
