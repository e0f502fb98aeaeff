"""The one mapping from dispatch errors to Airflow exceptions (DESIGN §5), for tasks and for trigger events.

Whether a task should be retried is the dispatch error's family, never the caller's guess:

* `UnreachableError` and its subclasses (`PodsRemainError`, `ConflictError`, `SuspensionNotObservedError`):
  nothing was decided, so waiting can help -> `AirflowException`, which Airflow retries while retries remain;
* `RefusedError` and its subclasses (not found, not managed, invalid name, forbidden, spec rejected, finished):
  the same call cannot succeed -> `AirflowFailException`, which fails the task without retrying.

Triggers run in the triggerer, where an exception would only say "Trigger failure"; so a trigger never raises
for a dispatch error but returns `error_event(error)`, and the worker turns that event back into the same
exception with `exception_for_event`. An error class the mapping does not know (a bug, a client library error)
is retryable: only a refusal that dispatch itself recognised may fail a task for good.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Final

from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException

from airflow_provider_dispatch.dispatch import errors as dispatch_errors_module
from airflow_provider_dispatch.dispatch.errors import DispatchError, PodsRemainError, RefusedError, UnreachableError

#: every dispatch error class by name, so an error event names a class the worker can map
DISPATCH_ERROR_CLASSES: Final[Mapping[str, type[DispatchError]]] = {
    name: member
    for name, member in inspect.getmembers(dispatch_errors_module, inspect.isclass)
    if issubclass(member, DispatchError)
}


def airflow_exception(error: DispatchError) -> AirflowException:
    """The Airflow exception to raise for a dispatch error: a refusal fails the task, anything else retries."""
    if isinstance(error, RefusedError):
        return AirflowFailException(error.message)
    return AirflowException(error.message)


@contextmanager
def airflow_errors() -> Iterator[None]:
    """Raise any dispatch error of the block as its Airflow exception (the original is kept as the cause)."""
    try:
        yield
    except DispatchError as error:
        raise airflow_exception(error) from error


def error_event(error: BaseException, *, ref: str) -> dict[str, Any]:
    """A trigger's error event payload: JSON only, enough for `exception_for_event` to rebuild the mapping."""
    refused = isinstance(error, RefusedError)
    message = str(error) or type(error).__name__
    return {
        "status": "error",
        "error_class": type(error).__name__,
        "retryable": not refused,
        "message": message,
        "ref": ref,
    }


def dispatch_error_for_event(event: Mapping[str, Any]) -> DispatchError:
    """The dispatch error an error event stands for; an unknown class reads as retryable (UnreachableError)."""
    message = str(event.get("message") or "the trigger reported an error without a message")
    ref = event.get("ref") if isinstance(event.get("ref"), str) else None
    found = DISPATCH_ERROR_CLASSES.get(str(event.get("error_class", "")))
    if found is None or issubclass(found, PodsRemainError) or not issubclass(found, RefusedError | UnreachableError):
        # PodsRemainError needs its pods to be rebuilt; its message already names them.
        return UnreachableError(message, ref=ref)
    return found(message, ref=ref)


def exception_for_event(event: Mapping[str, Any]) -> AirflowException:
    """The Airflow exception for a trigger's error event, by the same mapping as `airflow_exception`."""
    error = dispatch_error_for_event(event)
    exception = airflow_exception(error)
    exception.__cause__ = error
    return exception


__all__ = [
    "DISPATCH_ERROR_CLASSES",
    "airflow_errors",
    "airflow_exception",
    "dispatch_error_for_event",
    "error_event",
    "exception_for_event",
]
