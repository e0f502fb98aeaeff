"""`dispatch lab serve`'s options: one-line errors that write nothing, TLS that makes kubectl send its token, and
RBAC with a kubeconfig for each identity, checked with the real kubectl."""

from __future__ import annotations

import base64
import socket
import subprocess
from pathlib import Path

import yaml

from .conftest import DISPATCH, KubectlRun, serve, stop


def _serve_fails(folder: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(DISPATCH), "lab", "serve", *options], cwd=folder, capture_output=True, text=True, timeout=60, check=False
    )


def test_a_bad_option_is_a_usage_error_that_writes_nothing(tmp_path: Path) -> None:
    for options, said in (
        (("--speed", "-1"), "Invalid value for '--speed': -1.0 is not in the range x>0."),
        (("--speed", "0"), "Invalid value for '--speed': 0.0 is not in the range x>0."),
        (("--port", "70000"), "Invalid value for '--port': 70000 is not in the range 0<=x<=65535."),
        (("--nodes", "-2"), "Invalid value for '--nodes': -2 is not in the range x>=0."),
    ):
        done = _serve_fails(tmp_path, *options)
        assert done.returncode == 2, done
        assert done.stderr.splitlines()[-1] == f"Error: {said}"
        assert "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_missing_folder_is_refused_not_created(tmp_path: Path) -> None:
    done = _serve_fails(tmp_path, "--kubeconfig", "no/such/folder/kubeconfig.yaml")
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (
        f"Error: Invalid value for '--kubeconfig': folder {tmp_path}/no/such/folder does not exist "
        "(the lab creates no folders)"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_busy_port_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _serve_fails(tmp_path, "--bare", "--port", str(port), "--kubeconfig", "k.yaml")
    assert done.returncode == 1
    assert done.stderr == f"Error: cannot listen on 127.0.0.1:{port}: address already in use\n"
    assert done.stdout == ""
    assert list(tmp_path.iterdir()) == []


def test_tls_and_rbac_give_kubectl_each_identity(tmp_path: Path, kubectl: KubectlRun) -> None:
    served = serve(tmp_path, "--bare", "--tls", "--rbac")
    try:
        assert served.url.startswith("https://127.0.0.1:")
        assert sorted(served.kubeconfigs) == ["admin", "controller", "no-nodes", "reader", "writer"]
        assert served.kubeconfigs["writer"] == tmp_path / "lab-kubeconfig-writer.yaml"
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in served.kubeconfigs.values())
        config = yaml.safe_load(served.kubeconfigs["reader"].read_text())
        ca = base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"])
        assert ca.startswith(b"-----BEGIN CERTIFICATE-----")

        # kubectl sends the token only over TLS: the writer may list nodes and no-nodes may not, which no
        # anonymous request could show (anonymous may list neither).
        allowed = kubectl(served.kubeconfigs["writer"], "get", "nodes")
        assert allowed.returncode == 0, allowed.stderr
        assert allowed.stderr == "No resources found\n"
        denied = kubectl(served.kubeconfigs["no-nodes"], "get", "nodes")
        assert denied.returncode == 1
        assert denied.stderr.strip() == (
            'Error from server (Forbidden): nodes is forbidden: User "system:serviceaccount:dispatch-system:'
            'dispatch-no-nodes" cannot list resource "nodes" in API group "" at the cluster scope'
        )
        written = kubectl(served.kubeconfigs["reader"], "create", "namespace", "nope")
        assert written.returncode == 1
        assert 'cannot create resource "namespaces"' in written.stderr
        listed = kubectl(served.kubeconfigs["reader"], "get", "trainjobs", "-n", "default")
        assert listed.returncode == 0, listed.stderr
        assert listed.stderr == "No resources found in default namespace.\n"
    finally:
        assert stop(served) == 0
