"""The `lab` extra: what it brings, and the one line that says what to install when it is missing.

The package without extras brings what an Airflow worker needs and nothing more. The lab (the local API server
and its simulated cluster), the real control plane's launcher and `dispatch demo` import more: JSON patches, CEL
validation of the CRDs, a CA for the real control plane. Those come with the `lab` extra (`pip install './[lab]'`
in a clone: the package is on no index yet). A lab command run without them stops before anything starts,
prints one line on standard error that names the command to run (`LAB_EXTRA_INSTALL`), and exits
`EXIT_MISSING_EXTRA`, rather than failing with an ImportError deep inside the lab.

Checked by `importlib.util.find_spec`, which finds a module without importing it: the check costs nothing and
leaves `sys.modules` as it was.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping
from typing import Any, Final

import click

#: the distribution that brings each module the `lab` extra adds (pyproject's `[project.optional-dependencies]`)
LAB_EXTRA_MODULES: Final[Mapping[str, str]] = {
    "celpy": "cel-python",
    "jsonpatch": "jsonpatch",
    "cryptography": "cryptography",
    # the real control plane's hollow kubelets reach the lab's machines over CRI (lab/real/cri.py, cri_stubs.py)
    "grpc": "grpcio",
    "grpc_tools": "grpcio-tools",
}
#: the package is on no index yet (docs/quickstart.md, "Install"): the extra is installed from a clone
LAB_EXTRA_INSTALL: Final = "pip install './[lab]' in a clone of airflow-provider-dispatch (it is on no package index)"
#: a lab command's exit code when the `lab` extra is not installed (docs/cli.rst, "Exit codes")
EXIT_MISSING_EXTRA: Final = 4


def missing_lab_distributions(find_spec: Callable[[str], Any] = importlib.util.find_spec) -> list[str]:
    """The distributions of the `lab` extra whose module cannot be found, in a stable order."""
    return sorted(dist for module, dist in LAB_EXTRA_MODULES.items() if find_spec(module) is None)


def missing_extra_message(command: str, missing: list[str]) -> str:
    """One line: which command needs what, and the exact command that installs it."""
    return f"{command} needs the lab extra (missing: {', '.join(missing)}): {LAB_EXTRA_INSTALL}"


def require_lab_extra(command: str) -> None:
    """Stop a lab command with `EXIT_MISSING_EXTRA` and one line on stderr when the `lab` extra is missing."""
    missing = missing_lab_distributions()
    if missing:
        click.echo(missing_extra_message(command, missing), err=True)
        raise click.exceptions.Exit(EXIT_MISSING_EXTRA)
