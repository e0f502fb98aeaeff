"""What the install tests share: the distributions a requirement needs, and a folder of links to them.

A new virtual environment gets its dependencies from this test environment rather than from the package index:
a folder of links to exactly the distributions the package's requirements need, transitively (their installed
metadata says which), on its path. pip then takes them as installed and fetches nothing but what a build needs.
"""

from __future__ import annotations

import importlib.metadata
import sysconfig
from collections.abc import Callable
from pathlib import Path

from packaging.requirements import Requirement


def canonical(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def requirement_closure(names: list[str]) -> set[str]:
    """The installed distributions `names` need, transitively (no extras: what `pip install NAME` brings)."""
    seen: set[str] = set()
    todo = [canonical(name) for name in names]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue  # a requirement for another platform or Python, not installed here
        for text in requires:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(canonical(requirement.name))
    return seen


def worker_requirements() -> list[str]:
    """The distributions `pip install airflow-provider-dispatch` asks for (no extra)."""
    requires = importlib.metadata.requires("airflow-provider-dispatch") or []
    return [Requirement(text).name for text in requires if Requirement(text).marker is None]


#: the two distributions of this repository: the provider and its lab (lab/), which the `lab` extra installs
PROVIDER, LAB = "airflow-provider-dispatch", "airflow-provider-dispatch-lab"


def lab_extra() -> list[str]:
    """The distributions the provider's `lab` extra asks for (the lab's own distribution)."""
    requires = importlib.metadata.requires(PROVIDER) or []
    return [
        Requirement(text).name
        for text in requires
        if (marker := Requirement(text).marker) is not None and marker.evaluate({"extra": "lab"})
    ]


def lab_requirements() -> list[str]:
    """What the lab's distribution asks for besides the provider: what the `lab` extra adds to a worker's install."""
    requires = importlib.metadata.requires(LAB) or []
    names = [Requirement(text).name for text in requires if Requirement(text).marker is None]
    return [name for name in names if canonical(name) != PROVIDER]


def link_site(folder: Path, keep: Callable[[str], bool]) -> Path:
    """A folder of links to the top-level entries of this environment's site-packages for which `keep` holds."""
    folder.mkdir()
    purelib = Path(sysconfig.get_paths()["purelib"])
    for entry in purelib.iterdir():
        if keep(entry.name):
            (folder / entry.name).symlink_to(entry)
    return folder


def top_level(distributions: set[str]) -> set[str]:
    """The top-level site-packages entries the installed distributions own (shared `__pycache__` aside)."""
    entries: set[str] = set()
    for name in distributions:
        try:
            files = importlib.metadata.distribution(name).files or []
        except importlib.metadata.PackageNotFoundError:
            continue
        entries |= {path.parts[0] for path in files if path.parts[0] not in ("..", "__pycache__")}
    return entries
