"""The two API servers one conformance test body checks: the lab's and the real one (docs/fidelity.md).

A test module that talks only to the API lists both in `API_SERVERS = ("lab", "real")`; `tests/conftest.py` then
runs each of its tests once per server, and the fixtures `api_client`, `core_v1`, `custom_objects`, `kubeconfig`,
`async_api_client` and `namespace` reach that server. Without `API_SERVERS` a test gets the lab only.

Where the two servers differ on purpose, a test says so by name with `server.expect(lab=..., real=...)`, and the
difference is listed in docs/fidelity.md ("Differential results") with its reason. The controls a test needs that
are not API calls (compacting the store) are methods here, one per server.

What the real server runs that the session lab does not: the Trainer, JobSet, Job, Kueue, scheduler, PodGC and
garbage collector controllers. So the conformance tests' pods name a scheduler nobody runs (`pod`): the real
scheduler would otherwise bind them and the nodes' kubelets run them, which adds writes the tests do not make.
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from airflow_provider_dispatch_lab.real import RealCluster
from airflow_provider_dispatch_lab.runtime import Lab
from airflow_provider_dispatch_lab.scenario import manifests

T = TypeVar("T")
SERVERS = ("lab", "real")
#: a scheduler nobody runs: the real kube-scheduler leaves such pods alone (`schedulerName` is its filter)
UNSCHEDULED = "dispatch-conformance-no-scheduler"


def make_pod(name: str, **options: Any) -> dict[str, Any]:
    """`manifests.pod`, for a scheduler nobody runs: a pod without `node_name` stays unbound on both servers."""
    body = manifests.pod(name, **options)
    body["spec"]["schedulerName"] = UNSCHEDULED
    return body


@dataclass
class Server:
    """One API server under test: its name, its admin kubeconfig, and the controls that are not API calls."""

    name: str
    kubeconfig: Path
    lab: Lab | None = None
    real: RealCluster | None = None

    def expect(self, *, lab: T, real: T) -> T:
        """The value this server is expected to give, where the two differ by design (docs/fidelity.md)."""
        return lab if self.name == "lab" else real

    def compact(self) -> None:
        """Forget every revision before now: the lab's store, or etcd itself (its v3 JSON gateway, as
        `etcdctl compaction` does). The real API server's compaction (every 5 minutes) does the same."""
        if self.lab is not None:
            lab = self.lab
            lab.call(lambda: lab.inner.store.compact())
            return
        assert self.real is not None
        etcd = self.real.etcd_url
        key = base64.b64encode(b"/").decode()
        revision = _etcd_post(etcd, "/v3/kv/range", {"key": key, "limit": 1})["header"]["revision"]
        _etcd_post(etcd, "/v3/kv/compaction", {"revision": revision, "physical": True})


def _etcd_post(base: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST")
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=30, context=ssl.create_default_context()) as answer:
        decoded: dict[str, Any] = json.loads(answer.read())
    return decoded
