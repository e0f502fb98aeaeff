"""The one write the controller makes to a Workload: its own check entries, by server-side apply. Pure.

`status.admissionChecks` is a map list keyed by `name` (k8s-apis.md §4.2), so an apply that carries only our
entry, under our own field manager, owns exactly that entry's `state`, `message` and `lastTransitionTime` and
leaves every other field (Kueue's conditions, other checks, `retryCount`, `podSetUpdates`) to its owners. This
is how Kueue's own admission check controllers write (k8s-apis.md §4.4: SSA on `/status`, their name as field
manager, ForceOwnership; force because Kueue re-applies every entry as it holds it).

* `lastTransitionTime` moves only when the state changes, as `metav1.Condition` semantics and Kueue's own
  writers do; a new message in the same state keeps the time.
* The message is cut to Kueue's limit of 32768 characters (`workload_types.go` maxLength), a last guard for
  messages that quote an error; the waiting message is far shorter already (`payloads.KUEUE_MESSAGE_LIMIT`,
  `dispatch.explain.kueue_waiting_message`).
* `retryCount` is never written: Kueue counts retries itself.
* The configuration carries the Workload's uid and the resourceVersion that was read. The API server then
  applies it only to that Workload as it was read (409 otherwise), so a verdict reached on a Workload that was
  evicted and reserved again meanwhile is not applied to the new reservation: the controller reads it again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.payloads import KUEUE_MESSAGE_API_LIMIT, cut


def clip(message: str) -> str:
    return cut(message, KUEUE_MESSAGE_API_LIMIT)


def entry_unchanged(previous: Mapping[str, Any] | None, state: str, message: str) -> bool:
    return previous is not None and previous.get("state") == state and previous.get("message") == clip(message)


def check_entry(name: str, state: str, message: str, previous: Mapping[str, Any] | None, now: str) -> dict[str, Any]:
    """`{name, state, message, lastTransitionTime}`: the time kept unless the state changes."""
    since = previous.get("lastTransitionTime") if previous is not None else None
    keep = previous is not None and previous.get("state") == state and isinstance(since, str) and since
    return {"name": name, "state": state, "message": clip(message), "lastTransitionTime": since if keep else now}


def workload_status_patch(workload: Mapping[str, Any], entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The apply configuration for our entries of this Workload, conditional on the version read."""
    metadata: dict[str, Any] = {"name": v.name_of(workload), "namespace": v.namespace_of(workload)}
    for key in ("uid", "resourceVersion"):
        value = v.field(workload, "metadata", key)
        if isinstance(value, str) and value:
            metadata[key] = value
    return {
        "apiVersion": v.WORKLOAD.api_version,
        "kind": v.WORKLOAD.kind,
        "metadata": metadata,
        "status": {"admissionChecks": entries},
    }


__all__ = ["check_entry", "clip", "entry_unchanged", "workload_status_patch"]
