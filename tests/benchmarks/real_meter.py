"""What the real API server and its etcd spent, read from the programs themselves (the real drain benchmark).

A `ServerReading` is one look at counters that only grow:

* CPU seconds of the kube-apiserver and of etcd: `utime + stime` of `/proc/<pid>/stat` (clock ticks, all
  threads), read first when a window opens last and first when it closes, so the metrics scrapes below, which
  cost the API server CPU of their own, fall outside the window;
* bytes etcd sent to its gRPC clients (`etcd_network_client_grpc_sent_bytes_total` on etcd's `/metrics`): the
  API server is etcd's only client here, so this is what it read from etcd (watch events included);
* from the API server's `/metrics`, for pods: lists served by the watch cache (`apiserver_cache_list_total`)
  and the objects it scanned for them, lists served by etcd (`apiserver_storage_list_total`, which also counts
  the one-object list a consistent read makes to learn etcd's current revision) and the objects fetched from
  etcd for them, consistent reads that gave up waiting for the cache and fell back to etcd
  (`apiserver_watch_cache_consistent_read_total{fallback="true"}`), the bytes of pod LIST answers
  (`apiserver_response_sizes_sum`), and the watch cache's periodic consistency checks
  (`apiserver_storage_consistency_checks_total`), each of which reads every pod from etcd: a window that
  holds one is not a window of the read being measured.

Names and labels are those of k8s.io/apiserver v0.36 (`pkg/storage/cacher/metrics`, `pkg/storage/etcd3/metrics`,
`pkg/endpoints/metrics`) and etcd v3.6 (`server/etcdserver/api/v3rpc/metrics.go`).
"""

from __future__ import annotations

import os
import re
import ssl
import urllib.request
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

TICKS = os.sysconf("SC_CLK_TCK")
_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[^}]*)\})? (?P<value>\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process, all its threads (`/proc/<pid>/stat` fields 14 and 15)."""
    text = Path(f"/proc/{pid}/stat").read_text()
    after_name = text[text.rindex(")") + 2 :].split()  # the name, in brackets, may hold spaces
    return (int(after_name[11]) + int(after_name[12])) / TICKS


def parse_metrics(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Prometheus text format as (name, labels, value) samples."""
    samples = []
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match is None:
            continue
        labels = dict(_LABEL.findall(match["labels"] or ""))
        samples.append((match["name"], labels, float(match["value"])))
    return samples


def total(samples: list[tuple[str, dict[str, str], float]], name: str, **wanted: str) -> float:
    """The sum of `name`'s samples whose labels include `wanted`."""
    return sum(
        value
        for sample, labels, value in samples
        if sample == name and all(labels.get(key) == item for key, item in wanted.items())
    )


@dataclass(frozen=True)
class ServerReading:
    apiserver_cpu: float = 0.0
    etcd_cpu: float = 0.0
    etcd_sent_bytes: float = 0.0
    cache_lists: float = 0.0
    cache_scanned: float = 0.0
    etcd_lists: float = 0.0
    etcd_fetched: float = 0.0
    consistent_fallbacks: float = 0.0
    list_response_bytes: float = 0.0
    consistency_checks: float = 0.0

    def __sub__(self, other: ServerReading) -> ServerReading:
        return ServerReading(*(getattr(self, f.name) - getattr(other, f.name) for f in fields(self)))

    def scaled(self, factor: float) -> ServerReading:
        return ServerReading(*(getattr(self, f.name) * factor for f in fields(self)))

    def as_json(self) -> dict[str, float]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ServerReading:
        return cls(**{f.name: float(data[f.name]) for f in fields(cls)})


@dataclass(frozen=True)
class ServerMeter:
    """Reads the API server's and etcd's counters (`read`); `opening()` and `closing()` order them so that
    the scrapes' own CPU stays outside a measured window."""

    apiserver_url: str
    token: str
    ca_file: Path
    etcd_url: str
    apiserver_pid: int
    etcd_pid: int

    def _get(self, url: str, *, tls: bool) -> str:
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {self.token}"} if tls else {})
        context = ssl.create_default_context(cafile=str(self.ca_file)) if tls else None
        with urllib.request.urlopen(request, timeout=60, context=context) as answer:
            return str(answer.read().decode())

    def _counters(self) -> dict[str, float]:
        api = parse_metrics(self._get(f"{self.apiserver_url}/metrics", tls=True))
        etcd = parse_metrics(self._get(f"{self.etcd_url}/metrics", tls=False))
        return {
            "etcd_sent_bytes": total(etcd, "etcd_network_client_grpc_sent_bytes_total"),
            "cache_lists": total(api, "apiserver_cache_list_total", resource="pods"),
            "cache_scanned": total(api, "apiserver_cache_list_fetched_objects_total", resource="pods"),
            "etcd_lists": total(api, "apiserver_storage_list_total", resource="pods"),
            "etcd_fetched": total(api, "apiserver_storage_list_fetched_objects_total", resource="pods"),
            "consistent_fallbacks": total(
                api, "apiserver_watch_cache_consistent_read_total", resource="pods", fallback="true"
            ),
            "list_response_bytes": total(api, "apiserver_response_sizes_sum", resource="pods", verb="LIST"),
            "consistency_checks": total(api, "apiserver_storage_consistency_checks_total", resource="pods"),
        }

    def _cpu(self) -> dict[str, float]:
        return {
            "apiserver_cpu": process_cpu_seconds(self.apiserver_pid),
            "etcd_cpu": process_cpu_seconds(self.etcd_pid),
        }

    def opening(self) -> ServerReading:
        """Counters first, CPU last: the window starts after the scrapes."""
        counters = self._counters()
        return ServerReading(**counters, **self._cpu())

    def closing(self) -> ServerReading:
        """CPU first, counters after: the window ends before the scrapes."""
        cpu = self._cpu()
        return ServerReading(**self._counters(), **cpu)
