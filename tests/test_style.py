"""The project's own checks, run as tests so that the README's one test command covers them too."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)


@pytest.mark.parametrize(
    "command",
    [
        ("ruff", "check", "."),
        ("ruff", "format", "--check", "."),
    ],
    ids=["ruff-check", "ruff-format"],
)
def test_ruff(command: tuple[str, ...]) -> None:
    result = _run(sys.executable, "-m", *command)
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict() -> None:
    result = _run(sys.executable, "-m", "mypy")
    assert result.returncode == 0, result.stdout + result.stderr


#: the provider's modules and the lab's (lab/, a distribution of its own)
PACKAGE_MODULES = sorted(
    [
        *(ROOT / "airflow_provider_dispatch").rglob("*.py"),
        *(ROOT / "lab" / "airflow_provider_dispatch_lab").rglob("*.py"),
    ]
)


@pytest.mark.parametrize("path", PACKAGE_MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_module_says_what_it_owns(path: Path) -> None:
    """A newcomer opening any module reads first what it owns: a docstring whose first line is a phrase of its
    own (not a bare title), the rest saying why."""
    docstring = ast.get_docstring(ast.parse(path.read_text(), filename=str(path)))
    assert docstring, f"{path.relative_to(ROOT)} has no module docstring"
    first = docstring.splitlines()[0]
    assert len(first.split()) >= 5, f"{path.relative_to(ROOT)}: the docstring's first line {first!r} says too little"


@pytest.mark.parametrize("path", PACKAGE_MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_waits_with_asyncio_wait_for(path: Path) -> None:
    """`asyncio.timeout`, never `asyncio.wait_for`: on Python 3.11 (the oldest the package admits), `wait_for`
    returns the inner result when its task is cancelled in the same turn the inner wait ends, so the cancellation
    is lost (python/cpython#86296; 3.12 rebuilt `wait_for` on `asyncio.timeout`, python/cpython#96764). A lost
    cancellation kept a killed admission controller renewing its Lease forever in CI, and would keep a cancelled
    trigger or a stopped lab controller running."""
    tree = ast.parse(path.read_text(), filename=str(path))
    calls = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr == "wait_for"
        and isinstance(node.value, ast.Name)
        and node.value.id == "asyncio"
    ]
    assert calls == [], f"{path.name}: asyncio.wait_for on lines {calls}; use `async with asyncio.timeout(...)`"
