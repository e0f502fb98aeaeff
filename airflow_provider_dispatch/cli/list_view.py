"""How `dispatch list` reads: one `kubectl get`-style row per managed TrainJob, or a document for a script.

What blocks each TrainJob is read off the Status the rule computed (`assessment.assess`: its state, cause and
remaining pods with their nodes' states), never decided again here: a waiting TrainJob is blocked by its
remaining pods, grouped by node; one waiting without pods by its cause (the hold not yet observed); a held one in
Kueue mode by its cause (the pending admission check). Nothing blocks a running, finished, or plainly held one.

Pure: no I/O and no clock; the caller passes `now`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final

from airflow_provider_dispatch.cli.status_view import age, error_dict, table
from airflow_provider_dispatch.dispatch.assessment import Mode, State, Status
from airflow_provider_dispatch.dispatch.programs import Listed
from airflow_provider_dispatch.dispatch.vocabulary import parse_time

#: kubectl's placeholder for an empty cell
NONE: Final = "<none>"
LIST_HEADER: Final = ("NAME", "STATE", "MODE", "ADMISSION", "AGE", "BLOCKED BY")
WIDE_HEADER: Final = ("NAME", "STATE", "MODE", "JOB ID", "SUBMISSION", "ADMISSION", "AGE", "CAUSE", "BLOCKED BY")


def blocked_by(status: Status) -> str:
    """What keeps the TrainJob from its next step, in a few words, from the rule's own status."""
    if status.state is State.WAITING:
        if not status.remaining:
            return status.cause
        per_node = Counter((pod.node.name or NONE, pod.node.label) for pod in status.remaining)
        return "; ".join(
            f"{count} pod{'s' if count > 1 else ''} on {node} ({label})"
            for (node, label), count in sorted(per_node.items())
        )
    if status.state is State.HELD and status.mode is Mode.KUEUE:
        return status.cause
    return NONE


def list_row(entry: Listed, status: Status, now: datetime, *, wide: bool, namespaces: bool) -> tuple[str, ...]:
    namespace, name = entry.ref.split("/", 1)
    execution = status.execution
    when = age(parse_time(entry.created), now)
    if wide:
        cells: tuple[str, ...] = (
            name,
            status.state.value,
            status.mode.value,
            execution.job_id,
            execution.submission,
            str(execution.admission),
            when,
            status.cause,
            blocked_by(status),
        )
    else:
        cells = (name, status.state.value, status.mode.value, str(execution.admission), when, blocked_by(status))
    return (namespace, *cells) if namespaces else cells


def list_header(*, wide: bool, namespaces: bool) -> tuple[str, ...]:
    header = WIDE_HEADER if wide else LIST_HEADER
    return ("NAMESPACE", *header) if namespaces else header


def render_list_rows(
    entries: Sequence[Listed], now: datetime, *, wide: bool, namespaces: bool, header: bool = True
) -> list[str]:
    """The table (with its header unless `header` is False: a watch's later rows), assessed entries only."""
    rows = [
        list_row(entry, entry.status, now, wide=wide, namespaces=namespaces)
        for entry in entries
        if entry.status is not None
    ]
    if not header:
        return table(list_header(wide=wide, namespaces=namespaces), rows)[1:]
    return table(list_header(wide=wide, namespaces=namespaces), rows)


def changed_rows(
    before: Sequence[Listed], after: Sequence[Listed], now: datetime, *, wide: bool, namespaces: bool
) -> list[Listed]:
    """The entries whose row reads differently, AGE aside: as with `kubectl get --watch`, a row is printed again
    when its TrainJob changes, not as it ages."""
    at = list_header(wide=wide, namespaces=namespaces).index("AGE")

    def cells(entry: Listed, status: Status) -> tuple[str, ...]:
        row = list_row(entry, status, now, wide=wide, namespaces=namespaces)
        return row[:at] + row[at + 1 :]

    seen = {entry.ref: cells(entry, entry.status) for entry in before if entry.status is not None}
    return [entry for entry in after if entry.status is not None and seen.get(entry.ref) != cells(entry, entry.status)]


def list_document(entries: Sequence[Listed]) -> dict[str, Any]:
    """`-o json|yaml`: each assessed TrainJob's `Status.as_dict()` with its creation time, and each refusal."""
    return {
        "items": [
            {**entry.status.as_dict(), "created": entry.created} for entry in entries if entry.status is not None
        ],
        "errors": [error_dict(entry.refused) for entry in entries if entry.refused is not None],
    }


__all__ = [
    "LIST_HEADER",
    "NONE",
    "WIDE_HEADER",
    "blocked_by",
    "changed_rows",
    "list_document",
    "list_header",
    "render_list_rows",
]
