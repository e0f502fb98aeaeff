"""Dependencies point one way: the provider never imports the lab; the lab may import the provider.

The rule is the folder. The provider is the package `airflow_provider_dispatch/`, all of it: what an Airflow
deployment or a cluster runs. The lab is another distribution with its own package, `airflow_provider_dispatch_lab`
(lab/ of the repository), commands (`dispatch lab`, `dispatch demo`) included. No module of the provider imports
it, with no exception: `dispatch` finds the lab's commands through entry points, by name
(`airflow_provider_dispatch/cli/extras.py`; docs/architecture.md, "The import rule").

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
#: the lab's package, in its own distribution's folder
LAB = "airflow_provider_dispatch_lab"
LAB_ROOT = ROOT / "lab"


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


def is_lab(module: str) -> bool:
    return module == LAB or module.startswith(LAB + ".")


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
    """The imports of one provider module that reach the lab."""
    found: dict[int, str] = {}  # one line per import statement: its first name of the lab
    for imported in imports_of(path, root):
        if not is_lab(imported.target) or imported.line in found:
            continue
        where = "inside a function" if imported.in_function else "at module level"
        found[imported.line] = f"{path.relative_to(root)}:{imported.line} imports {imported.target} ({where})"
    return list(found.values())


PROVIDER_MODULES = sorted((ROOT / PACKAGE).rglob("*.py"))


def test_the_provider_and_the_lab_are_both_found() -> None:
    lab = [module_name(path, LAB_ROOT) for path in (LAB_ROOT / LAB).rglob("*.py")]
    assert len(PROVIDER_MODULES) > 50, PROVIDER_MODULES
    assert len(lab) > 50, lab
    assert all(is_lab(module) for module in lab)
    assert {f"{LAB}.cli", f"{LAB}.demo", f"{LAB}.runtime"} <= set(lab)
    assert {module_name(p) for p in PROVIDER_MODULES} >= {
        f"{PACKAGE}.cli",
        f"{PACKAGE}.kueue.controller",
        f"{PACKAGE}.dispatch.programs",
        f"{PACKAGE}.triggers.watch",
    }


@pytest.mark.parametrize("path", PROVIDER_MODULES, ids=lambda p: str(p.relative_to(ROOT / PACKAGE)))
def test_a_provider_module_never_imports_the_lab(path: Path) -> None:
    found = crossings(path)
    assert not found, "the provider imports the lab:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("source", "crossing"),
    [
        ("from airflow_provider_dispatch_lab.simulated.cluster import ClusterContext\n", "at module level"),
        ("def f():\n    from airflow_provider_dispatch_lab import drill\n", "inside a function"),
        ("import airflow_provider_dispatch_lab.runtime\n", "at module level"),
        ("import airflow_provider_dispatch_lab as lab\n", "at module level"),
        (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from airflow_provider_dispatch_lab import runtime\n",
            "at module level",
        ),
        (
            "import importlib\ndef f():\n    "
            "importlib.import_module('airflow_provider_dispatch_lab.scenario.presets')\n",
            "inside",
        ),
        ("from airflow_provider_dispatch_lab.demo import run_demo\n", "at module level"),
        ("def f():\n    from airflow_provider_dispatch_lab.cli import lab\n", "inside a function"),
        ("def f():\n    return __import__('airflow_provider_dispatch_lab')\n", "inside a function"),
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


def test_the_check_reads_names_not_prefixes(tmp_path: Path) -> None:
    """A provider module whose name merely begins like the lab's (or a relative import, which cannot leave the
    provider's package) is not a crossing."""
    package = tmp_path / PACKAGE / "kueue"
    package.mkdir(parents=True)
    module = package / "probe.py"
    module.write_text("import airflow_provider_dispatch_labels\nfrom ..lab import x\nfrom . import lab\n")
    assert crossings(module, root=tmp_path) == []
