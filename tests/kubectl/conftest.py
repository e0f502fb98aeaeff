"""The real kubectl (built beside the real control plane, `controlplane/build`) against `dispatch lab serve`.

`served` starts `dispatch lab serve` as a person would, in a folder of the test's own, and stops it with SIGINT;
`kubectl` runs the pinned kubectl (Kubernetes v1.36.3) with a kubeconfig the lab wrote. Nothing is mocked: kubectl
discovers, downloads OpenAPI, asks for Tables and sends its token over HTTP(S) exactly as against a cluster.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from served_lab import DISPATCH, Served, serve, stop

from airflow_provider_dispatch_lab.real.binaries import locate

__all__ = ["DISPATCH", "KubectlRun", "Served", "serve", "stop"]


@pytest.fixture(scope="session")
def kubectl_program() -> str:
    return locate(build=False).program("kubectl")


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
