"""The one seam between `dispatch` and the lab: the lab's commands are found through its entry points, by name.

The provider names nothing of the lab (tests/test_import_direction.py); the lab, installed here, offers `lab` and
`demo` in the entry point group `airflow_provider_dispatch.commands`, and the `dispatch` group finds them there.
A provider's command never pays for the lookup: `dispatch status` starts without importing the lab. Without the
lab installed, its commands say what to install (tests/test_lean_install.py, on the provider's wheel alone).
"""

from __future__ import annotations

import json
import subprocess
import sys

import click
from click.testing import CliRunner

import airflow_provider_dispatch_lab.cli
from airflow_provider_dispatch.cli.commands import main
from airflow_provider_dispatch.cli.extras import LAB_COMMANDS, lab_command, lab_command_names, missing_extra_message


def test_the_installed_lab_offers_exactly_its_commands() -> None:
    assert lab_command_names() == sorted(LAB_COMMANDS)
    assert lab_command("lab") is airflow_provider_dispatch_lab.cli.lab
    assert lab_command("demo") is airflow_provider_dispatch_lab.cli.demo
    assert lab_command("status") is None, "the provider's own commands are not looked up"


def test_dispatch_lists_and_runs_the_lab_commands() -> None:
    context = click.Context(main)
    assert {"lab", "demo", "status", "pod-fence"} <= set(main.list_commands(context))
    assert main.get_command(context, "lab") is airflow_provider_dispatch_lab.cli.lab
    listed = CliRunner().invoke(main, ["lab", "--help"])
    assert listed.exit_code == 0, listed.output
    assert "serve" in listed.output
    assert "verdict" in listed.output
    unknown = CliRunner().invoke(main, ["no-such-command"])
    assert unknown.exit_code == 2
    assert "No such command" in unknown.output


def test_a_provider_command_does_not_import_the_lab() -> None:
    probe = (
        "import json, sys\n"
        "from click.testing import CliRunner\n"
        "from airflow_provider_dispatch.cli.commands import main\n"
        "result = CliRunner().invoke(main, ['status', '--help'])\n"
        "lab = sorted(m for m in sys.modules if m.startswith('airflow_provider_dispatch_lab'))\n"
        "print(json.dumps([result.exit_code, lab]))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [0, []]


def test_the_missing_lab_line_names_the_command_and_what_to_install() -> None:
    line = missing_extra_message("dispatch lab serve")
    assert line.startswith("dispatch lab serve needs the lab extra (airflow-provider-dispatch-lab is not installed): ")
    assert "pip install . ./lab" in line
