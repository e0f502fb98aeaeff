"""Waiting on the lab through the API, the way a controller would: list, then watch from the list's
resourceVersion until a predicate holds.

Nothing here sleeps to poll. The wall-clock `timeout` is only a failure bound: a test that waits longer than it
has failed, and the error says what was last seen. A watch that the server ends (its `timeoutSeconds`, or a 410
Gone for a compacted resourceVersion) is resumed with a fresh list, as a client-go reflector does.

    pod = wait_for(core.list_namespaced_pod, "p", lambda p: p is not None and p.status.phase == "Running",
                   namespace=ns)
    wait_for(core.list_namespaced_pod, "p", lambda p: p is None, namespace=ns)      # until it is gone

`list_fn` is any list function of the official client (`CoreV1Api.list_namespaced_pod`, `list_node`,
`CustomObjectsApi.list_namespaced_custom_object`, ...); keyword arguments go to it unchanged. With a `name` the
predicate sees that one object, or None while it does not exist; without one it sees every listed or changed
object in turn (deletions excepted) and the first match is returned.

With `since`, a resourceVersion the test read before it made (or let lab time make) the change it waits for, the
predicate sees every version written after it, in order, instead of the current state: a state that lab time
moves past (a Workload evicted, then re-queued once its backoff ends) is found however late the test looks. A
`since` the server has compacted is an error, never a silent fresh list.

    mark = kueue.revision()
    scenario.advance(1800)
    evicted = wait_for(list_fn, "wl", lambda w: is_evicted(w), since=mark, ...)
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from kubernetes import watch
from kubernetes.client import ApiException

_NOTHING_SEEN = object()


def _items(listed: Any) -> list[Any]:
    items = listed["items"] if isinstance(listed, dict) else listed.items
    return list(items or [])


def _resource_version(listed: Any) -> str:
    if isinstance(listed, dict):
        return str(listed["metadata"]["resourceVersion"])
    return str(listed.metadata.resource_version)


def _describe(obj: Any) -> str:
    if obj is _NOTHING_SEEN:
        return "nothing"
    if obj is None:
        return "no such object"
    raw = obj if isinstance(obj, dict) else obj.to_dict()
    metadata = raw.get("metadata") or {}
    if metadata.get("managedFields") or metadata.get("managed_fields"):  # pages of bookkeeping: what changed is below
        shown = {k: v for k, v in metadata.items() if k not in ("managedFields", "managed_fields")}
        raw = {**raw, "metadata": shown}
    return repr(raw)[:3000]


def wait_for(
    list_fn: Callable[..., Any],
    name: str | None,
    predicate: Callable[[Any], bool],
    *,
    timeout: float = 30.0,
    since: str | None = None,
    **list_kwargs: Any,
) -> Any:
    """The object (or None for "absent") once `predicate` holds (with `since`: the first version after it that
    holds); TimeoutError after `timeout` wall seconds."""
    if "field_selector" in list_kwargs and name is not None:
        raise ValueError("give either a name or a field_selector, not both")
    selector = f"metadata.name={name}" if name is not None else list_kwargs.pop("field_selector", None)
    if selector:
        list_kwargs["field_selector"] = selector
    deadline = time.monotonic() + timeout
    last: Any = _NOTHING_SEEN
    resume = since
    while True:
        if since is None:
            listed = list_fn(**list_kwargs)
            resume = _resource_version(listed)
            items = _items(listed)
            if name is not None:
                last = items[0] if items else None
                if predicate(last):
                    return last
            else:
                for item in items:
                    last = item
                    if predicate(item):
                        return item
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(
                f"waited {timeout} s for {name or selector or 'an object'}; last seen: {_describe(last)}"
            )
        watcher = watch.Watch()
        try:
            for event in watcher.stream(
                list_fn,
                resource_version=resume,
                timeout_seconds=max(1, math.ceil(remaining)),
                _request_timeout=remaining + 5,
                **list_kwargs,
            ):
                resume = watcher.resource_version  # where a resumed watch goes on (`since`: no version skipped)
                if event["type"] == "BOOKMARK":
                    continue
                obj = None if event["type"] == "DELETED" else event["object"]
                if obj is not None or name is not None:
                    last = obj
                    if predicate(obj):
                        return obj
                if time.monotonic() >= deadline:
                    break
        except ApiException as error:
            if error.status != 410:
                raise
            if since is not None:
                message = f"the versions after resourceVersion {since} are compacted: {error.reason}"
                raise RuntimeError(message) from error
        finally:
            watcher.stop()
