"""How `dispatch status`, `find` and `list` run a read and show its answer, once or on every change (--watch).

Each command gives a read (a function of a read-only adapter and now) and a `Shown`: how its answer prints the
first time, what prints after a change, what the watch must follow, and the exit code. `report` runs them and
turns a `DispatchError` into its exit code (`status_view.exit_code`), as a document on standard output under
`-o json|yaml`, else as `Error: ...` on standard error. No Airflow import (the command must start fast).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Generic, NoReturn, TypeVar

import click

from airflow_provider_dispatch.cli.list_view import changed_rows, list_document, render_list_rows
from airflow_provider_dispatch.cli.options import MACHINE_OUTPUTS, ClusterOptions
from airflow_provider_dispatch.cli.status_view import (
    EXIT_OK,
    EXIT_REFUSED,
    creation_time,
    error_dict,
    exit_code,
    render_document,
    render_text,
)
from airflow_provider_dispatch.dispatch import vocabulary
from airflow_provider_dispatch.dispatch.assessment import Mode, Status
from airflow_provider_dispatch.dispatch.errors import DispatchError, RefusedError
from airflow_provider_dispatch.dispatch.programs import Listed, server_time
from airflow_provider_dispatch.dispatch.validation import parse_ref
from airflow_provider_dispatch.dispatch.vocabulary import ApiCoordinates

if TYPE_CHECKING:
    from airflow_provider_dispatch.dispatch.sync_adapter import DispatchAdapter

_T = TypeVar("_T")


@dataclass(frozen=True)
class Shown(Generic[_T]):
    """How one command shows its answer: first, again after a change (None: unchanged), and its exit code."""

    first: Callable[[_T, datetime], str]
    again: Callable[[_T, _T, datetime], str | None]
    sources: Callable[[_T], list[tuple[ApiCoordinates, str | None]]]
    code: Callable[[_T], int] = lambda _: EXIT_OK


def fail(error: DispatchError, output: str) -> NoReturn:
    if output in MACHINE_OUTPUTS:
        click.echo(render_document(error_dict(error), output))
    else:
        click.echo(f"Error: {error.message}", err=True)
    raise click.exceptions.Exit(exit_code(error)) from None


def report(read: Callable[[DispatchAdapter, datetime], _T], shown: Shown[_T], options: ClusterOptions) -> None:
    """Run a read on a read-only adapter and print it (again on each change with --watch), or fail."""
    try:
        if options.watch:
            _watch(read, shown, options)
            return
        with _adapter(options) as adapter:
            answer, now = _timed_read(read, adapter)
            text = shown.first(answer, now)
            if text:
                click.echo(text)
            raise click.exceptions.Exit(shown.code(answer))
    except DispatchError as error:
        fail(error, options.output)


def _adapter(options: ClusterOptions) -> DispatchAdapter:
    from airflow_provider_dispatch.dispatch.sync_adapter import DispatchAdapter

    timeout = options.request_timeout
    extra = {} if timeout is None else {"request_timeout": (timeout, timeout)}
    return DispatchAdapter.from_kubeconfig(options.kubeconfig, context=options.context, read_only=True, **extra)


def _watch(read: Callable[[DispatchAdapter, datetime], _T], shown: Shown[_T], options: ClusterOptions) -> None:
    """--watch: Ctrl-C is a message from here on (watch.interrupts), through the first read and the close."""
    from airflow_provider_dispatch.cli.watch import interrupts, watch

    with interrupts() as inbox, _adapter(options) as adapter:
        watch(
            lambda: _timed_read(read, adapter),
            lambda first: shown.first(*first),
            lambda before, after: shown.again(before[0], *after),
            lambda timed: shown.sources(timed[0]),
            adapter.api_client,
            inbox,
            click.echo,
        )


def server_now(adapter: DispatchAdapter) -> datetime:
    """The API server's clock (the `Date` of its answer to `GET /version`): what AGE and the deadlines are
    measured against, as `kubectl get` measures AGE (the API server prints the Table, on its own clock). A
    machine whose clock is off, or a lab whose time runs faster than the wall clock, then still reads ages that
    agree with kubectl's. A server that refuses to tell its time leaves the local clock; one that does not answer
    fails the command at once, as its read would."""
    try:
        moment = adapter.run(server_time("the API server's clock"))
    except RefusedError:
        moment = None
    return moment if moment is not None else datetime.now(UTC)


def _timed_read(read: Callable[[DispatchAdapter, datetime], _T], adapter: DispatchAdapter) -> tuple[_T, datetime]:
    """The answer of `read`, and the server's now it was read and is shown at."""
    now = server_now(adapter)
    return read(adapter, now), now


def status_sources(status: Status) -> list[tuple[ApiCoordinates, str | None]]:
    """What a status depends on: the TrainJob, its JobSet and Jobs, its pods, their nodes (and its Workload)."""
    namespace = parse_ref(status.ref).namespace
    kinds = [vocabulary.TRAINJOB, vocabulary.JOBSET, vocabulary.JOB, vocabulary.POD]
    if status.mode is Mode.KUEUE:
        kinds.append(vocabulary.WORKLOAD)
    return [(kind, namespace) for kind in kinds] + [(vocabulary.NODE, None)]


def status_shown(output: str) -> Shown[tuple[Status, datetime | None]]:
    def first(answer: tuple[Status, datetime | None], now: datetime) -> str:
        status, created = answer
        if output in MACHINE_OUTPUTS:
            return render_document(status.as_dict(), output)
        return render_text(status, created=created, now=now)

    def again(before: tuple[Status, datetime | None], after: tuple[Status, datetime | None], now: datetime) -> str:
        if before[0].as_dict() == after[0].as_dict():
            return ""
        return first(after, now) if output in MACHINE_OUTPUTS else "\n" + first(after, now)

    return Shown(first, again, lambda answer: status_sources(answer[0]))


def with_created(status: Status, adapter: DispatchAdapter) -> tuple[Status, datetime | None]:
    """The status and the TrainJob's creation time, for AGE only: a failed read shows `<unknown>`."""
    from airflow_provider_dispatch.dispatch.programs import ApiFailure, GetObject

    target = parse_ref(status.ref)
    answer = adapter.respond(GetObject(vocabulary.TRAINJOB, target.namespace, target.name))
    return status, None if isinstance(answer, ApiFailure) else creation_time(answer)


def list_shown(output: str, namespaces: bool, scope: str | None) -> Shown[tuple[Listed, ...]]:
    wide = output == "wide"

    def first(entries: tuple[Listed, ...], now: datetime) -> str:
        for entry in entries:
            if entry.refused is not None and output not in MACHINE_OUTPUTS:
                click.echo(f"Error: {entry.refused.message}", err=True)
        if output in MACHINE_OUTPUTS:
            return render_document(list_document(entries), output)
        if not any(entry.status is not None for entry in entries):
            where = "any namespace" if scope is None else f"namespace {scope}"
            click.echo(f"No TrainJobs managed by dispatch found in {where}.", err=True)
            return ""
        return "\n".join(render_list_rows(entries, now, wide=wide, namespaces=namespaces))

    def again(before: tuple[Listed, ...], after: tuple[Listed, ...], now: datetime) -> str | None:
        if output in MACHINE_OUTPUTS:
            seen = {entry.ref: entry.status.as_dict() for entry in before if entry.status is not None}
            documents = [e for e in after if e.status is not None and seen.get(e.ref) != e.status.as_dict()]
            return render_document(list_document(documents), output) if documents else None
        changed = changed_rows(before, after, now, wide=wide, namespaces=namespaces)
        if not changed:
            return None
        return "\n".join(render_list_rows(changed, now, wide=wide, namespaces=namespaces, header=False))

    def sources(entries: tuple[Listed, ...]) -> list[tuple[ApiCoordinates, str | None]]:
        kinds = [vocabulary.TRAINJOB, vocabulary.JOBSET, vocabulary.JOB, vocabulary.POD]
        if any(entry.status is not None and entry.status.mode is Mode.KUEUE for entry in entries):
            kinds.append(vocabulary.WORKLOAD)
        return [(kind, scope) for kind in kinds] + [(vocabulary.NODE, None)]

    def code(entries: tuple[Listed, ...]) -> int:
        return EXIT_REFUSED if any(entry.refused is not None for entry in entries) else EXIT_OK

    return Shown(first, again, sources, code)


__all__ = ["Shown", "fail", "list_shown", "report", "status_shown", "with_created"]
