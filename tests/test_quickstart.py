"""The quickstart (docs/quickstart.md), step by step, as a person runs it: two processes and real HTTP.

Step 1, the install, runs as written in a copy of the source tree (a fresh clone has no `.venv`): the documented
shell lines make a virtual environment there and `pip install . ./lab` builds and installs the provider and its
lab from the tree. Only where the dependencies come from differs from a person's run: this environment's, linked on
`PYTHONPATH` (`installs.py`), so pip takes them as installed and fetches only the build backend.

`dispatch lab serve` runs as its own process (the installed console script); the documented script creates the
documented objects through `$KUBECONFIG`; `dispatch status` must print what the page shows (AGE aside, it
depends on when the test runs); the documented `AIRFLOW_CONN_KUBERNETES_DEFAULT` must let the cncf-kubernetes
hook reach the lab. The lab is stopped with SIGINT, as Ctrl-C stops it, and must exit cleanly.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from installs import lab_requirements, link_site, requirement_closure, top_level, worker_requirements

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "docs" / "examples"
DISPATCH = Path(sys.executable).with_name("dispatch")


def without_age(text: str) -> str:
    """The status output with the AGE cell of the table row blanked (the last column of line 2)."""
    lines = text.splitlines()
    lines[1] = re.sub(r"\s+\S+$", "", lines[1])
    return "\n".join(lines)


@pytest.fixture
def served_lab(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    """`dispatch lab serve --speed 1 --kubeconfig lab-kubeconfig.yaml` in `tmp_path`, until SIGINT."""
    assert DISPATCH.is_file(), f"the dispatch console script is not installed next to {sys.executable}"
    server = subprocess.Popen(
        [str(DISPATCH), "lab", "serve", "--speed", "1", "--kubeconfig", "lab-kubeconfig.yaml"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert server.stdout is not None
        first = server.stdout.readline()
        second = server.stdout.readline()
        assert re.fullmatch(r"lab API server on http://127\.0\.0\.1:\d+ \(lab time x1\.0\)\n", first), first
        assert second == f"kubeconfig: {tmp_path / 'lab-kubeconfig.yaml'}\n", second
        yield tmp_path, server
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGINT)
            server.wait(timeout=30)


def _hold_observed(kubeconfig: Path, namespace: str, name: str) -> bool:
    """Watch the TrainJob until its Suspended condition is True (the timeout is only a failure bound)."""
    import kubernetes

    client = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
    custom = kubernetes.client.CustomObjectsApi(client)
    try:
        stream = kubernetes.watch.Watch().stream(
            custom.list_namespaced_custom_object,
            "trainer.kubeflow.org",
            "v1alpha1",
            namespace,
            "trainjobs",
            field_selector=f"metadata.name={name}",
            timeout_seconds=30,
        )
        for event in stream:
            conditions = (event["object"].get("status") or {}).get("conditions") or []
            if any(c.get("type") == "Suspended" and c.get("status") == "True" for c in conditions):
                return True
        return False
    finally:
        client.close()


def test_quickstart(served_lab: tuple[Path, subprocess.Popen[str]]) -> None:
    workdir, server = served_lab
    env = {**os.environ, "KUBECONFIG": str(workdir / "lab-kubeconfig.yaml"), "AIRFLOW_HOME": str(workdir)}

    def run(*command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True, check=False, timeout=120)

    created = run(sys.executable, str(EXAMPLES / "create_objects.py"), str(EXAMPLES / "quickstart-trainjob.yaml"))
    assert created.returncode == 0, created.stderr
    assert created.stdout == "created ClusterTrainingRuntime torch-distributed\ncreated TrainJob quickstart\n"
    # The lab's Trainer marks the hold as observed a moment later; a person would not notice, a test must wait.
    assert _hold_observed(workdir / "lab-kubeconfig.yaml", "default", "quickstart")

    status = run(str(DISPATCH), "status", "default/quickstart")
    assert status.returncode == 0, status.stderr
    shown = (EXAMPLES / "quickstart-status.txt").read_text(encoding="utf-8")
    assert without_age(status.stdout) == without_age(shown)
    assert re.search(r"\s\d+s$", status.stdout.splitlines()[1]), "AGE against a lab at speed 1 reads in seconds"

    found = run(str(DISPATCH), "find", "default", "--job-id", "quickstart", "-o", "json")
    assert found.returncode == 0, found.stderr
    assert '"ref": "default/quickstart"' in found.stdout

    # The documented connection, sourced as the page says, reaches the lab through the cncf-kubernetes hook.
    probe = (
        "from airflow.providers.cncf.kubernetes.hooks.kubernetes import KubernetesHook; "
        "tj = KubernetesHook().custom_object_client.get_namespaced_custom_object("
        "'trainer.kubeflow.org', 'v1alpha1', 'default', 'trainjobs', 'quickstart'); "
        "print(tj['metadata']['labels']['dispatch.phpboyscout.uk/job-id'])"
    )
    hooked = run(
        "bash", "-c", f'source {EXAMPLES / "airflow-connection.sh"} && exec "$0" -c "$1"', sys.executable, probe
    )
    assert hooked.returncode == 0, hooked.stderr[-3000:]
    assert hooked.stdout.splitlines()[-1] == "quickstart"

    server.send_signal(signal.SIGINT)
    assert server.wait(timeout=30) == 0


def install_lines() -> str:
    """The shell lines of the quickstart's step 1 that install the package (its first `sh` block)."""
    text = (ROOT / "docs" / "quickstart.md").read_text(encoding="utf-8")
    step = text.split("## 1. Install", 1)[1].split("## 2.", 1)[0]
    found = re.search(r"```sh\n(.*?)```", step, re.DOTALL)
    assert found is not None, "step 1 of the quickstart has no sh block"
    return found.group(1)


def test_the_documented_install_builds_and_installs_from_the_source_tree(tmp_path: Path) -> None:
    lines = install_lines()
    assert "pip install . ./lab" in lines.splitlines()
    clone = tmp_path / "airflow-provider-dispatch"
    shutil.copytree(
        ROOT,
        clone,
        ignore=shutil.ignore_patterns(".venv", ".git", "__pycache__", "_build", "dist", ".*_cache", "*.egg-info"),
    )
    needed = top_level(requirement_closure([*worker_requirements(), *lab_requirements()]))
    deps = link_site(tmp_path / "deps", lambda name: name in needed)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    env.update(PYTHONPATH=str(deps), PIP_DISABLE_PIP_VERSION_CHECK="1", HOME=str(tmp_path))
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", lines], cwd=clone, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    python, dispatch = clone / ".venv" / "bin" / "python", clone / ".venv" / "bin" / "dispatch"
    located = subprocess.run(
        [str(python), "-c", "import airflow_provider_dispatch as p; print(p.__file__)"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert Path(located.stdout.strip()).is_relative_to(clone / ".venv"), "installed, not imported from the tree"
    # the lab is there: `dispatch` finds `dispatch lab serve`, which gets to its own usage error
    serve = subprocess.run(
        [str(dispatch), "lab", "serve", "--speed", "0"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert serve.returncode == 2, serve.stdout + serve.stderr
    assert "Invalid value for '--speed'" in serve.stderr
