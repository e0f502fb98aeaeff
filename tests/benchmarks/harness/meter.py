"""Requests and bytes as the lab's meter counts them (`lab/apiserver/metering.py`), read and subtracted on the client
side.

The meter's counters only grow; what one measured call cost is the difference between a reading taken just
before it and one just after, with nothing else talking to the lab meanwhile (a benchmark runs one case at a
time). Readings are taken outside the timed window, so reading costs the measured client nothing it is charged
for.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_dispatch_lab.apiserver.metering import METRICS_KIND


@dataclass(frozen=True)
class Traffic:
    """Requests and bytes (request line, headers and body each way), as the lab's meter counts them."""

    requests: int = 0
    request_bytes: int = 0
    response_bytes: int = 0

    @property
    def bytes(self) -> int:
        """Both directions: what crossed the wire for these requests."""
        return self.request_bytes + self.response_bytes

    def __add__(self, other: Traffic) -> Traffic:
        return Traffic(
            self.requests + other.requests,
            self.request_bytes + other.request_bytes,
            self.response_bytes + other.response_bytes,
        )

    def __sub__(self, other: Traffic) -> Traffic:
        return Traffic(
            self.requests - other.requests,
            self.request_bytes - other.request_bytes,
            self.response_bytes - other.response_bytes,
        )

    def as_json(self) -> dict[str, int]:
        return {"requests": self.requests, "requestBytes": self.request_bytes, "responseBytes": self.response_bytes}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Traffic:
        return cls(int(data["requests"]), int(data["requestBytes"]), int(data["responseBytes"]))


SeriesKey = tuple[str, str, str]


@dataclass(frozen=True)
class MeterReading:
    """One `GET /lab/metrics`: traffic per (user, verb, resource)."""

    series: Mapping[SeriesKey, Traffic] = field(default_factory=dict)

    @classmethod
    def parse(cls, body: Mapping[str, Any]) -> MeterReading:
        if body.get("kind") != METRICS_KIND:
            raise ValueError(f"not a {METRICS_KIND} answer: {str(body)[:120]}")
        series = {(s["user"], s["verb"], s["resource"]): Traffic.from_json(s) for s in body["series"]}
        return cls(series)

    def __sub__(self, earlier: MeterReading) -> MeterReading:
        keys = set(self.series) | set(earlier.series)
        delta = {k: self.series.get(k, Traffic()) - earlier.series.get(k, Traffic()) for k in keys}
        return MeterReading({k: t for k, t in delta.items() if t.requests or t.bytes})

    def total(self, *, verbs: Iterable[str] | None = None, resources: Iterable[str] | None = None) -> Traffic:
        """The traffic of the series with these verbs and resources (all when None)."""
        verb_set = None if verbs is None else set(verbs)
        resource_set = None if resources is None else set(resources)
        result = Traffic()
        for (_, verb, resource), traffic in self.series.items():
            if (verb_set is None or verb in verb_set) and (resource_set is None or resource in resource_set):
                result += traffic
        return result
