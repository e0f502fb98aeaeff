"""The `lab` extra: the one seam between `dispatch` and the lab's commands, and the line that says what to install.

The package without extras brings what an Airflow worker needs and nothing more. The lab (the local API server
and its simulated cluster, the real control plane's launcher, `dispatch lab` and `dispatch demo`) is a
distribution of its own, `airflow-provider-dispatch-lab` (lab/ of the repository), which the `lab` extra
installs. It offers its commands as entry points of the group `COMMANDS_GROUP`; `dispatch` looks one up, by name,
only when it is asked for (`lab_command`), so this package never names, let alone imports, the lab's modules
(tests/test_import_direction.py checks that by folder). A lab command asked of an installation without the lab
stops before anything starts, prints one line on standard error that names the command to run
(`LAB_EXTRA_INSTALL`), and exits `EXIT_MISSING_EXTRA`.

The lookup reads installed metadata only (`importlib.metadata.entry_points`): `dispatch status` never makes it,
and `dispatch --help` makes it without importing anything of the lab but the module its commands live in.
"""

from __future__ import annotations

import importlib.metadata
from typing import Final

import click

#: the distribution the `lab` extra installs (pyproject's `[project.optional-dependencies]`)
LAB_DISTRIBUTION: Final = "airflow-provider-dispatch-lab"
#: the entry point group in which the lab offers its `dispatch` commands (lab/pyproject.toml)
COMMANDS_GROUP: Final = "airflow_provider_dispatch.commands"
#: the commands the lab adds: asked for without it, they say what to install instead of "No such command"
LAB_COMMANDS: Final = ("demo", "lab")
#: neither distribution is on an index yet (docs/quickstart.md, "Install"): both are installed from a clone, by
#: their paths given plainly (pip 23.2 matches the lab's requirement of the provider to `./[lab]` only when that
#: path comes first, pypa/pip#8785)
LAB_EXTRA_INSTALL: Final = "pip install . ./lab in a clone of airflow-provider-dispatch (it is on no package index)"
#: a lab command's exit code when the `lab` extra is not installed (docs/cli.rst, "Exit codes")
EXIT_MISSING_EXTRA: Final = 4


def lab_command_names() -> list[str]:
    """The commands the installed lab offers (none without it), sorted."""
    return sorted({entry.name for entry in importlib.metadata.entry_points(group=COMMANDS_GROUP)})


def lab_command(name: str) -> click.Command | None:
    """The lab's command `name`, loaded from its entry point; None when no installed distribution offers it."""
    for entry in importlib.metadata.entry_points(group=COMMANDS_GROUP, name=name):
        command = entry.load()
        if not isinstance(command, click.Command):
            raise TypeError(f"entry point {entry.value} of {COMMANDS_GROUP} is not a click command")
        return command
    return None


def missing_extra_message(command: str) -> str:
    """One line: which command needs the lab, and the exact command that installs it."""
    return f"{command} needs the lab extra ({LAB_DISTRIBUTION} is not installed): {LAB_EXTRA_INSTALL}"


def missing_lab_command(words: list[str]) -> click.exceptions.Exit:
    """Print the missing-extra line for `dispatch <words>` and return the exit to raise."""
    click.echo(missing_extra_message(" ".join(["dispatch", *words])), err=True)
    return click.exceptions.Exit(EXIT_MISSING_EXTRA)
