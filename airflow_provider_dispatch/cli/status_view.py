"""How a status reads for a person and for a script: what `dispatch status` and `dispatch find` print.

A person gets the kubectl shape: one table row (NAME, STATE, MODE, the execution identity, AGE), then a short
describe-style block with the cause, the remaining pods and their nodes, and the explanation texts of
`dispatch.explain`, verbatim, so that the command line, the sensor's log and the Kueue admission check message
all say the same thing in the same words. A script gets `Status.as_dict()` as JSON, unchanged.

Pure: no I/O and no clock; the caller passes `now`. No Airflow import (the `dispatch` command must start fast).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from airflow_provider_dispatch.dispatch.assessment import State, Status
from airflow_provider_dispatch.dispatch.blocking import RemainingPod
from airflow_provider_dispatch.dispatch.errors import DispatchError, UnreachableError
from airflow_provider_dispatch.dispatch.explain import remaining_line
from airflow_provider_dispatch.dispatch.vocabulary import parse_time

#: exit codes of `dispatch status` / `dispatch find` (docs/cli.rst says the same)
EXIT_OK: Final = 0
EXIT_REFUSED: Final = 1
EXIT_USAGE: Final = 2
EXIT_UNREACHABLE: Final = 3
#: Ctrl-C before the answer: 128 + SIGINT, what a shell reports for a program SIGINT ended (kubectl, for one)
EXIT_INTERRUPTED: Final = 130

UNKNOWN_AGE: Final = "<unknown>"
_REMAINING_PREFIX: Final = remaining_line(()).split(":", 1)[0] + ":"


def exit_code(error: DispatchError) -> int:
    """The exit code for an error the command could not get past.

    Retryable errors (`UnreachableError` and its subclasses: API unreachable, 5xx, 429, timeout) exit 3, so a
    script can tell "try again later" from a refusal (`RefusedError`: not found, not managed, forbidden, an
    unloadable kubeconfig), which exits 1. Invalid arguments never get here: they are usage errors (exit 2).
    """
    return EXIT_UNREACHABLE if isinstance(error, UnreachableError) else EXIT_REFUSED


def human_duration(seconds: float) -> str:
    """A duration as `kubectl get` prints AGE: two significant units at most.

    The same table as `kubernetes/apimachinery:pkg/util/duration/duration.go` `HumanDuration` (read in a
    vendored copy of v0.25.1; the function has not changed in later releases as far as the copies show):
    up to 2 s in the future reads `0s` (clock skew), further in the future `<invalid>`.
    """
    whole = int(seconds)
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 120:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        rest = whole % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = whole // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d{rest}h" if rest else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        years, days = hours // 24 // 365, (hours // 24) % 365
        return f"{years}y{days}d" if days else f"{years}y"
    return f"{hours // 24 // 365}y"


def age(created: datetime | None, now: datetime) -> str:
    """AGE as kubectl shows it, against `now` (the API server's clock, as `kubectl get`'s server-printed AGE is:
    `report.server_now`); `<unknown>` when unknown."""
    if created is None:
        return UNKNOWN_AGE
    return human_duration((now - created).total_seconds())


def table(header: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "") -> list[str]:
    """Columns left-aligned and separated by three spaces, as kubectl's tabwriter prints them."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]
    lines = []
    for row in (header, *rows):
        cells = [str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)]
        lines.append((indent + "   ".join(cells)).rstrip())
    return lines


STATUS_HEADER: Final = ("NAME", "STATE", "MODE", "JOB ID", "SUBMISSION", "ADMISSION", "AGE")
PODS_HEADER: Final = ("POD", "PHASE", "DELETING", "NODE", "NODE STATE", "CEASED")


def status_row(status: Status, age_text: str) -> tuple[str, ...]:
    execution = status.execution
    return (
        status.ref,
        status.state.value,
        status.mode.value,
        execution.job_id,
        execution.submission,
        str(execution.admission),
        age_text,
    )


def _pod_row(pod: RemainingPod) -> tuple[str, ...]:
    return (
        pod.name,
        pod.phase,
        "yes" if pod.terminating else "no",
        pod.node.name or "<none>",
        pod.node.label,
        "yes" if pod.ceased else "no",
    )


def render_text(status: Status, *, created: datetime | None, now: datetime) -> str:
    """The person's view: the table row, then cause, remaining pods and what would unblock them (for a running
    TrainJob: its unfinished pods and what keeps it from finishing, `unfinished.explain_unfinished`).

    The detail lines are `Status.detail`'s, verbatim (their wording is `dispatch.explain`'s); the
    `remaining pods: ...` line is left out when the pods are shown as a table just above it.
    """
    lines = table(STATUS_HEADER, [status_row(status, age(created, now))])
    lines += ["", f"Cause:   {status.cause}"]
    show_pods = bool(status.remaining) and status.state is not State.RUNNING
    if show_pods:
        ceased = sum(1 for pod in status.remaining if pod.ceased)
        lines.append(f"Remaining pods: {len(status.remaining)} ({ceased} ceased)")
        lines += table(PODS_HEADER, [_pod_row(pod) for pod in status.remaining], indent="  ")
    elif status.remaining:  # running: its unfinished pods, where they run; the detail says what blocks them
        lines.append(f"Pods not finished: {len(status.remaining)}")
        lines += table(PODS_HEADER, [_pod_row(pod) for pod in status.remaining], indent="  ")
    detail = [line for line in status.detail.splitlines() if line.strip()]
    if show_pods:
        detail = [line for line in detail if not line.startswith(_REMAINING_PREFIX)]
    if detail:
        lines.append("Detail:")
        lines += [f"  {line}" for line in detail]
    return "\n".join(lines)


def render_json(status: Status) -> str:
    """The script's view: `Status.as_dict()` as JSON, nothing added or left out."""
    return json.dumps(status.as_dict(), indent=2)


def render_document(document: Mapping[str, Any], output: str) -> str:
    """A machine document as `-o json` (indented JSON) or `-o yaml` (block YAML, keys in their order) prints it."""
    if output == "yaml":
        import yaml

        return yaml.safe_dump(dict(document), sort_keys=False, default_flow_style=False).rstrip("\n")
    return json.dumps(document, indent=2)


def usage_error_dict(message: str) -> dict[str, Any]:
    """A usage error in the shape of `error_dict`, for `-o json|yaml` (never retryable: the command is wrong)."""
    return {"error": {"type": "UsageError", "retryable": False, "ref": None, "message": message}}


def error_dict(error: DispatchError) -> dict[str, Any]:
    """An error as `--output json` prints it, so a script needs no second parser for failures."""
    return {
        "error": {
            "type": type(error).__name__,
            "retryable": error.retryable,
            "ref": error.ref,
            "message": error.message,
        }
    }


def creation_time(trainjob: Mapping[str, Any]) -> datetime | None:
    """The TrainJob's `metadata.creationTimestamp`, for AGE."""
    metadata = trainjob.get("metadata")
    return parse_time(metadata.get("creationTimestamp")) if isinstance(metadata, Mapping) else None


__all__ = [
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_REFUSED",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "age",
    "creation_time",
    "error_dict",
    "exit_code",
    "human_duration",
    "render_document",
    "render_json",
    "render_text",
    "status_row",
    "table",
    "usage_error_dict",
]
