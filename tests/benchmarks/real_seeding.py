"""Seeding a namespace of the real API server with thousands of pods, fast, and nothing measured meanwhile.

`RealEndpoint` answers the two calls `drain_scenario` makes of the lab's endpoint (`call`, `seed`), so the real
benchmark builds the very namespace the lab benchmark builds (`drain_scenario.build`, `DrainNamespace.grow`).

A few pods (the job's ranks) go through the API as a controller and a kubelet would write them: a `POST` of the
pod, bound to its node by `spec.nodeName` as the scheduler would, then a `PUT .../status` with the running
status the template carries. That is two requests per pod, and on the shared 2-CPU machine 50,000 pods took the
API server close to an hour. So a large batch (`copy_above` pods or more) is written the way the API server
itself stores pods: one pod of the batch, with fixed-width markers where the index and group go
(`bg-gggggg-node-0-iiiiii-x7k2p`), is created through the API as above; its stored bytes are read back from etcd
(protobuf, as the API server encoded it); every pod of the batch is that value with the markers replaced by
zero-padded numbers of the same width and a fresh uid of the same length, so every length prefix of the
encoding stays right, written to etcd one put per pod, so that each pod has a revision of its own as the API
server's writes do; the marker pod is deleted from etcd. (A first run batched 128 puts per transaction, so 128
pods shared a revision; the watch cache's consistency check (`DetectCacheInconsistency`) ran during the seeding,
found the cache at revision 824 without pods etcd held at 824, all of one transaction, called the cache
inconsistent and stopped keeping snapshots until a later check passed: the API server never writes two pods in
one revision, and the cache's bookkeeping assumes it.)
The API server's watch sees them as it sees any write (`ADDED`, one revision each). What is measured later reads
pods stored exactly as the API server stores a pod made through the API (the smoke test,
`test_real_drain_cost_smoke.py`, lists them back through the API).

No ServiceAccount controller runs beside an `apiserver_only` cluster, so the seeder creates a namespace's
`default` ServiceAccount before its first pod, as that controller would (the ServiceAccount admission plugin
refuses pods that name a missing account).
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import urllib.request
import uuid
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch_lab.apiserver.seeding import render
from airflow_provider_dispatch_lab.real.cluster import ApiError, RealCluster

WIDTH = 6
INDEX_MARK, GROUP_MARK = b"i" * WIDTH, b"g" * WIDTH


class SeedingError(RuntimeError):
    """The real API server or etcd refused a request of the seeding."""


@dataclass
class RealEndpoint:
    """The real API server as the admin, with the lab endpoint's `call` and `seed`."""

    cluster: RealCluster
    concurrency: int = 16
    copy_above: int = 64
    _accounts: set[str] = field(default_factory=set)

    @property
    def url(self) -> str:
        return self.cluster.url

    @property
    def etcd_url(self) -> str:
        return self.cluster.etcd_url

    def _ssl(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.cluster.ca_file))

    def call(self, method: str, path: str, body: Mapping[str, Any] | None = None, timeout: float = 600.0) -> Any:
        """One request as the admin (`RealCluster.request`); the decoded JSON answer, or `ApiError`."""
        return self.cluster.request(method, path, None if body is None else dict(body))

    def _ensure_account(self, namespace: str) -> None:
        if namespace in self._accounts:
            return
        try:
            self.call("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": "default"}})
        except ApiError as error:
            if error.code != 409:
                raise
        self._accounts.add(namespace)

    def seed(self, path: str, template: Mapping[str, Any], count: int, *, start: int = 0, group_size: int = 1) -> int:
        """Create pods `start` .. `start + count - 1` from `template` (`{i}`, `{g}` filled in) at `path`
        (`/api/v1/namespaces/<ns>/pods`), each with its status; returns how many were made."""
        if count < 0 or group_size < 1:
            raise ValueError(f"count ({count}) must be >= 0 and group_size ({group_size}) >= 1")
        parts = path.strip("/").split("/")
        if len(parts) != 5 or parts[:2] != ["api", "v1"] or parts[2] != "namespaces" or parts[4] != "pods":
            raise ValueError(f"the real seeder makes pods only, at /api/v1/namespaces/<ns>/pods, not {path}")
        self._ensure_account(parts[3])
        indices = range(start, start + count)
        if count >= self.copy_above:
            return self._copy(parts[3], dict(template), indices, group_size)
        return asyncio.run(self._seed(path, dict(template), indices, group_size))

    def _etcd(self, call: str, body: Mapping[str, Any]) -> Any:
        request = urllib.request.Request(f"{self.etcd_url}/v3/{call}", data=json.dumps(body).encode(), method="POST")
        with urllib.request.urlopen(request, timeout=120) as answer:
            return json.loads(answer.read())

    def _copy(self, namespace: str, template: dict[str, Any], indices: range, group_size: int) -> int:
        """The batch as copies of one marker pod's stored bytes (see the module docstring)."""
        if indices.stop >= 10**WIDTH or indices.stop // group_size >= 10**WIDTH:
            raise ValueError(f"at most {10**WIDTH - 1} pods per namespace are seeded by copy")
        text = json.dumps(template).replace("{i}", INDEX_MARK.decode()).replace("{g}", GROUP_MARK.decode())
        if INDEX_MARK.decode() not in text or GROUP_MARK.decode() not in text:
            raise ValueError("a template seeded by copy must use {i} and {g} (in its name at least)")
        marker = json.loads(text)
        status = marker.pop("status")
        pods = f"/api/v1/namespaces/{namespace}/pods"
        created = self.call("POST", pods, marker)
        created["status"] = status
        name, uid = v.name_of(created), str(created["metadata"]["uid"])
        self.call("PUT", f"{pods}/{name}/status", created)
        key = f"/registry/pods/{namespace}/{name}".encode()
        found = self._etcd("kv/range", {"key": base64.b64encode(key).decode()}).get("kvs") or []
        if len(found) != 1:
            raise SeedingError(f"the marker pod {namespace}/{name} is not in etcd under {key!r}")
        stored = base64.b64decode(found[0]["value"])
        if INDEX_MARK not in stored or GROUP_MARK not in stored or stored.count(uid.encode()) != 1:
            raise SeedingError(f"the stored marker pod {name} does not carry its markers and uid once")

        def put(index: int) -> None:
            numbers = {INDEX_MARK: b"%0*d" % (WIDTH, index), GROUP_MARK: b"%0*d" % (WIDTH, index // group_size)}
            value, copy_key = stored.replace(uid.encode(), str(uuid.uuid4()).encode()), key
            for mark, number in numbers.items():
                value, copy_key = value.replace(mark, number), copy_key.replace(mark, number)
            self._etcd(
                "kv/put", {"key": base64.b64encode(copy_key).decode(), "value": base64.b64encode(value).decode()}
            )

        with ThreadPoolExecutor(self.concurrency) as pool:
            list(pool.map(put, indices))  # list(): raise the first failure here
        self._etcd("kv/deleterange", {"key": base64.b64encode(key).decode()})
        return len(indices)

    async def _seed(self, path: str, template: dict[str, Any], indices: range, group_size: int) -> int:
        headers = {"Authorization": f"Bearer {self.cluster.token_for('admin')}", "Content-Type": "application/json"}
        connector = aiohttp.TCPConnector(ssl=self._ssl(), limit=self.concurrency)
        queue = iter(indices)
        made = 0

        async def one(session: aiohttp.ClientSession, index: int) -> None:
            pod = render(template, index, group_size)
            status = pod.pop("status")
            async with session.post(self.url + path, data=json.dumps(pod)) as answer:
                created = await answer.json(content_type=None)
                if answer.status != 201:
                    raise SeedingError(f"POST {path} ({v.name_of(pod)}): {answer.status} {str(created)[:300]}")
            created["status"] = status
            where = f"{self.url}{path}/{v.name_of(created)}/status"
            async with session.put(where, data=json.dumps(created)) as answer:
                if answer.status != 200:
                    raise SeedingError(f"PUT {where}: {answer.status} {(await answer.text())[:300]}")

        async def worker(session: aiohttp.ClientSession) -> None:
            nonlocal made
            for index in queue:  # one shared iterator: each index goes to one worker
                await one(session, index)
                made += 1

        async with aiohttp.ClientSession(connector=connector, headers=headers) as session:
            await asyncio.gather(*(worker(session) for _ in range(self.concurrency)))
        return made
