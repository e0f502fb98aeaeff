"""The real kubectl (built beside the real control plane, `controlplane/build`) against `dispatch lab serve`.

`served` starts `dispatch lab serve` as a person would, in a folder of the test's own, and stops it with SIGINT;
`kubectl` runs the pinned kubectl (Kubernetes v1.36.3) with a kubeconfig the lab wrote. Nothing is mocked: kubectl
discovers, downloads OpenAPI, asks for Tables and sends its token over HTTP(S) exactly as against a cluster.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from airflow_provider_dispatch.lab.real.binaries import locate

DISPATCH = Path(sys.executable).parent / "dispatch"


@dataclass
class Served:
    """A running `dispatch lab serve`: its URL and the kubeconfigs it printed, by identity."""

    process: subprocess.Popen[str]
    url: str
    kubeconfigs: dict[str, Path] = field(default_factory=dict)


@pytest.fixture(scope="session")
def kubectl_program() -> str:
    return locate(build=False).program("kubectl")


def serve(folder: Path, *options: str) -> Served:
    """Start `dispatch lab serve` in `folder` and read the lines that say where it is."""
    process = subprocess.Popen(
        [str(DISPATCH), "lab", "serve", "--kubeconfig", "lab-kubeconfig.yaml", *options],
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    first = process.stdout.readline()
    found = re.match(r"lab API server on (\S+) ", first)
    if found is None:
        process.kill()
        raise AssertionError(
            f"dispatch lab serve said {first!r}; stderr: {process.stderr.read() if process.stderr else ''}"
        )
    served = Served(process, found.group(1))
    expected = 5 if "--rbac" in options else 1
    for _ in range(expected):
        line = process.stdout.readline()
        named = re.fullmatch(r"kubeconfig(?: \((\S+)\))?: (.+)\n", line)
        assert named is not None, line
        served.kubeconfigs[named.group(1) or "admin"] = Path(named.group(2))
    return served


def stop(served: Served) -> int:
    if served.process.poll() is None:
        served.process.send_signal(signal.SIGINT)
    return served.process.wait(timeout=30)


@pytest.fixture(scope="module")
def lab_served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A lab with its simulated cluster (three nodes), plain http, no RBAC."""
    served = serve(tmp_path_factory.mktemp("lab"), "--speed", "20")
    yield served
    stop(served)


KubectlRun = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def kubectl(kubectl_program: str, tmp_path_factory: pytest.TempPathFactory) -> KubectlRun:
    """`kubectl(kubeconfig, *args, stdin=None)`: run the real kubectl; the result, whatever its exit code. Its
    HOME (where it caches discovery and OpenAPI) is a folder of its own."""
    home = tmp_path_factory.mktemp("kubectl-home")

    def run(kubeconfig: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(home)}
        return subprocess.run(
            [kubectl_program, *args], env=env, input=stdin, capture_output=True, text=True, timeout=120, check=False
        )

    return run
