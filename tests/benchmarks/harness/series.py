"""A meter difference as JSON rows by (verb, resource), and the sums a results table wants from them.

`MeterReading` keys its series by (user, verb, resource). A benchmark whose worker is the lab's only client
(one identity) reports by verb and resource: how many of its requests were gets, lists, watches or writes, and
of what. The rows are plain JSON (`{"verb", "resource", "requests", "requestBytes", "responseBytes"}`), so a
results file can be rendered again later (`--from-json`) without the harness's classes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .meter import MeterReading

Row = Mapping[str, Any]


def by_verb_resource(reading: MeterReading) -> list[dict[str, Any]]:
    """The reading's traffic summed over users, one row per (verb, resource), sorted."""
    merged: dict[tuple[str, str], list[int]] = {}
    for (_, verb, resource), traffic in reading.series.items():
        counts = merged.setdefault((verb, resource), [0, 0, 0])
        counts[0] += traffic.requests
        counts[1] += traffic.request_bytes
        counts[2] += traffic.response_bytes
    return [
        {"verb": verb, "resource": resource, "requests": r, "requestBytes": q, "responseBytes": s}
        for (verb, resource), (r, q, s) in sorted(merged.items())
    ]


def _chosen(rows: Iterable[Row], verbs: Sequence[str] | None, resources: Sequence[str] | None) -> list[Row]:
    return [
        row
        for row in rows
        if (verbs is None or row["verb"] in verbs) and (resources is None or row["resource"] in resources)
    ]


def request_count(
    rows: Iterable[Row], verbs: Sequence[str] | None = None, resources: Sequence[str] | None = None
) -> int:
    """Requests of the rows with these verbs and resources (all when None)."""
    return sum(int(row["requests"]) for row in _chosen(rows, verbs, resources))


def byte_count(rows: Iterable[Row], verbs: Sequence[str] | None = None, resources: Sequence[str] | None = None) -> int:
    """Bytes both ways of the rows with these verbs and resources (all when None)."""
    return sum(int(row["requestBytes"]) + int(row["responseBytes"]) for row in _chosen(rows, verbs, resources))
