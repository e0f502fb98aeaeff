"""Print the lowest Airflow versions pyproject.toml admits, one `name==version` a line, for `pip install -c`.

CI's second run (.ci/lowest) installs these so the lower bounds the package declares are tested, not only the
newest releases; reading them from pyproject.toml keeps one place for each bound. Every `apache-airflow*`
requirement of `[project].dependencies` must have a `>=` bound: one without is a clear error, nothing printed.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement


def lowest_pins(pyproject: Path) -> list[str]:
    """The `name==lower bound` pins of every Airflow requirement of the project's dependencies."""
    dependencies = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    pins = []
    for line in dependencies:
        requirement = Requirement(line)
        if not requirement.name.startswith("apache-airflow"):
            continue
        bounds = [spec.version for spec in requirement.specifier if spec.operator == ">="]
        if len(bounds) != 1:
            raise SystemExit(f"lowest_pins: {line!r} needs exactly one '>=' lower bound")
        pins.append(f"{requirement.name}=={bounds[0]}")
    if not pins:
        raise SystemExit(f"lowest_pins: no apache-airflow requirement in {pyproject}")
    return pins


if __name__ == "__main__":
    print("\n".join(lowest_pins(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("pyproject.toml"))))
