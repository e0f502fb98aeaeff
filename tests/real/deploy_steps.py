"""What the deploy tests of the real tier share: the pinned Helm and kustomize, kubectl, and controller processes.

Helm and kustomize are built by `controlplane/deploy-tools/build` (scripts/test and .ci/run export
`DISPATCH_DEPLOY_TOOLS_BIN`; without it the fixture asks the build for its cached folder). kubectl is the control
plane's own (`controlplane/build`).

The real tier has no container runtime: a Deployment's Pods are created by the real ReplicaSet controller but
never run. So the controller runs here as a process with what its Pod would have: the ServiceAccount's token (from
the real TokenRequest API, in a kubeconfig, since there is no mounted token), the container's arguments as the
chart or the kustomization renders them, `POD_NAME` and `POD_NAMESPACE` as the Downward API sets them, and its
HTTP port on loopback. A lost node is a SIGSTOP of the process (it neither works nor renews; its connections stay
open, as a partitioned machine's would).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from airflow_provider_dispatch_lab.real import RealCluster
from airflow_provider_dispatch_lab.real.cluster import write_kubeconfig

ROOT = Path(__file__).resolve().parents[2]
TOOLS_ENV = "DISPATCH_DEPLOY_TOOLS_BIN"
CHART = ROOT / "deploy" / "helm" / "dispatch-admission-controller"
KUSTOMIZATION = ROOT / "deploy" / "admission-controller"
Obj = dict[str, Any]


def deploy_tools() -> Path:
    """The folder with helm and kustomize (the `tools` fixture of conftest.py)."""
    given = os.environ.get(TOOLS_ENV)
    if given:
        return Path(given)
    build = ROOT / "controlplane" / "deploy-tools" / "build"
    found = subprocess.run([str(build), "--cached"], capture_output=True, text=True, check=False, timeout=60)
    if found.returncode != 0:
        pytest.fail(f"Helm and kustomize are not built: run {build} (or scripts/test, which runs it)")
    return Path(found.stdout.strip())


def run(argv: list[str | Path], *, stdin: str | None = None, timeout: float = 120.0) -> str:
    """A command's standard output; its failure fails the test with what it printed."""
    done = subprocess.run(
        [str(a) for a in argv], input=stdin, capture_output=True, text=True, check=False, timeout=timeout
    )
    assert done.returncode == 0, (
        f"{' '.join(str(a) for a in argv)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    )
    return done.stdout


def documents(text: str) -> list[Obj]:
    return [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]


def dump(docs: list[Obj]) -> str:
    return yaml.safe_dump_all(docs, sort_keys=False)


def kubectl(cluster: RealCluster, *args: str | Path, stdin: str | None = None, identity: str = "admin") -> str:
    assert cluster.build is not None
    return run([cluster.build.program("kubectl"), f"--kubeconfig={cluster.kubeconfig(identity)}", *args], stdin=stdin)


def by_kind(docs: list[Obj], kind: str) -> list[Obj]:
    return [d for d in docs if d.get("kind") == kind]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def service_account_kubeconfig(
    cluster: RealCluster, api: kubernetes.client.ApiClient, namespace: str, account: str, path: Path
) -> Path:
    """A kubeconfig with a token of the ServiceAccount, from the TokenRequest API (what the kubelet mounts)."""
    request = {"spec": {"audiences": [], "expirationSeconds": 3600}}
    answer = kubernetes.client.CoreV1Api(api).create_namespaced_service_account_token(account, namespace, request)
    return write_kubeconfig(path, cluster.url, cluster.ca_file, answer.status.token, account, namespace)


class ControllerProcess:
    """`dispatch admission-controller` as the chart's Pod would run it, in a process group of its own."""

    def __init__(self, name: str, namespace: str, args: list[str], kubeconfig: Path, logs: Path) -> None:
        self.name = name
        self.port = free_port()
        argv = [a for a in args if not a.startswith("--http-bind-address")]
        argv += [f"--http-bind-address=127.0.0.1:{self.port}", f"--kubeconfig={kubeconfig}"]
        self.argv = [str(Path(sys.executable).with_name("dispatch")), *argv]
        self.env = {**os.environ, "POD_NAME": name, "POD_NAMESPACE": namespace}
        self.logs = logs
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> ControllerProcess:
        with self.logs.open("ab") as log:
            self.process = subprocess.Popen(
                self.argv, env=self.env, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True
            )
        return self

    def signal(self, signum: signal.Signals) -> None:
        assert self.process is not None
        os.killpg(self.process.pid, signum)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM (SIGCONT first, in case it is stopped), then wait; SIGKILL if it does not exit."""
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process is not None else 0
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            self.process.wait(10)
            raise AssertionError(f"{self.name} did not stop within {timeout} s of SIGTERM") from None

    def get(self, path: str) -> tuple[int, str]:
        """An HTTP GET of its endpoints: (status, body); (0, why) when nothing answers."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()
        except OSError as error:
            return 0, str(error)

    def metric(self, name: str) -> float | None:
        status, text = self.get("/metrics")
        if status != 200:
            return None
        for line in text.splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                return float(line.rsplit(" ", 1)[1])
        return None

    def log_lines(self) -> list[Obj]:
        lines = []
        for raw in self.logs.read_text().splitlines():
            try:
                decoded = json.loads(raw)
            except ValueError:
                continue
            if isinstance(decoded, dict):
                lines.append(decoded)
        return lines
