"""The lab's storage: an MVCC store with one global resourceVersion, like etcd behind the apiserver.

What clients depend on, and the store reproduces:

- One counter orders every write of every kind (etcd's revision); an object's `metadata.resourceVersion` is the
  revision of its last write, and a list's `metadata.resourceVersion` is the store's revision when it was read
  (`apiserver/pkg/storage/etcd3/store.go`).
- Reads at a past revision: a list with `resourceVersionMatch=Exact` and every page of a paged list (the continue
  token pins the revision of the first page) see the store exactly as it was then, because each object keeps its
  revisions until compaction.
- Compaction (kube-apiserver compacts etcd every 5 minutes, `--etcd-compaction-interval`) forgets revisions older
  than the compacted one: a read or a watch from before it gets 410 Gone, which is what informers and paged lists
  must survive.
- Watches see every change after their starting revision, in order, with the previous object so that a selector
  can turn a change into ADDED or DELETED (`apiserver/pkg/storage/cacher/cache_watcher.go` `convertToWatchEvent`).

All methods are synchronous and run on the lab's event loop, so each write is atomic with respect to every
other request, as an etcd transaction is.
"""

from __future__ import annotations

import asyncio
import bisect
import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

Obj = dict[str, Any]
Key = tuple[str, str]  # (namespace or "", name)
EventType = Literal["ADDED", "MODIFIED", "DELETED"]

FIRST_REVISION = 1000
"""A fresh store starts here so that resourceVersions look like a real cluster's and `0` never collides."""


@dataclass(frozen=True)
class WatchEvent:
    """One change: the new object (or, for DELETED, its last state) and the object before the change."""

    revision: int
    type: EventType
    resource: str
    key: Key
    obj: Obj
    old: Obj | None


@dataclass
class _Revision:
    revision: int
    obj: Obj | None  # None marks a deletion


@dataclass(eq=False)
class Subscription:
    """A watcher's queue of events. Overflow ends the watch, as the apiserver drops a watcher that falls behind."""

    resource: str | None
    queue: asyncio.Queue[WatchEvent | None] = field(default_factory=lambda: asyncio.Queue(maxsize=100_000))
    closed: bool = False


class CompactedError(Exception):
    """The revision asked for is older than the compacted revision."""

    def __init__(self, requested: int, compacted: int) -> None:
        super().__init__(f"required revision {requested} has been compacted (compacted revision {compacted})")
        self.requested = requested
        self.compacted = compacted


class FutureRevisionError(Exception):
    """The revision asked for is newer than the store's."""

    def __init__(self, requested: int, current: int) -> None:
        super().__init__(f"revision {requested} is newer than the current revision {current}")
        self.requested = requested
        self.current = current


class Store:
    """Objects by resource (e.g. `pods`, `trainjobs.trainer.kubeflow.org`) and (namespace, name)."""

    def __init__(self) -> None:
        self._revision = FIRST_REVISION
        self._compacted = FIRST_REVISION
        self._objects: dict[str, dict[Key, list[_Revision]]] = {}
        self._sorted_keys: dict[str, list[Key]] = {}
        self._events: list[WatchEvent] = []
        self._event_revisions: list[int] = []
        self._subscriptions: set[Subscription] = set()
        self._listeners: list[Callable[[WatchEvent], None]] = []

    @property
    def revision(self) -> int:
        return self._revision

    @property
    def compacted_revision(self) -> int:
        return self._compacted

    # ----------------------------------------------------------------------------------------------- reads

    def get(self, resource: str, key: Key, revision: int | None = None) -> Obj | None:
        """The object at `revision` (default: now), as a copy the caller may change."""
        revisions = self._objects.get(resource, {}).get(key)
        if not revisions:
            return None
        found = self._visible(revisions, revision)
        return copy.deepcopy(found) if found is not None else None

    def scan(
        self,
        resource: str,
        namespace: str | None,
        revision: int | None = None,
        start_after: Key | None = None,
    ) -> Iterator[tuple[Key, Obj]]:
        """Objects in key order (namespace, name) as of `revision`, without copying: callers must not mutate."""
        if revision is not None:
            self.check_readable(revision)
        keys = self._sorted_keys.get(resource, [])
        position = 0
        if namespace is not None:
            position = bisect.bisect_left(keys, (namespace, ""))
        if start_after is not None:
            position = max(position, bisect.bisect_right(keys, start_after))
        revisions_by_key = self._objects.get(resource, {})
        for key in keys[position:]:
            if namespace is not None and key[0] != namespace:
                break
            obj = self._visible(revisions_by_key[key], revision)
            if obj is not None:
                yield key, obj

    def check_readable(self, revision: int) -> None:
        if revision < self._compacted:
            raise CompactedError(revision, self._compacted)
        if revision > self._revision:
            raise FutureRevisionError(revision, self._revision)

    @staticmethod
    def _visible(revisions: list[_Revision], revision: int | None) -> Obj | None:
        if revision is None:
            return revisions[-1].obj
        for entry in reversed(revisions):
            if entry.revision <= revision:
                return entry.obj
        return None

    # ---------------------------------------------------------------------------------------------- writes

    def put(self, resource: str, key: Key, obj: Obj) -> Obj:
        """Create or replace the object; stamps and returns it with its new resourceVersion."""
        revisions = self._objects.setdefault(resource, {}).setdefault(key, [])
        old = revisions[-1].obj if revisions else None
        self._revision += 1
        stored = copy.deepcopy(obj)
        stored.setdefault("metadata", {})["resourceVersion"] = str(self._revision)
        if not revisions:
            bisect.insort(self._sorted_keys.setdefault(resource, []), key)
        revisions.append(_Revision(self._revision, stored))
        self._publish(WatchEvent(self._revision, "MODIFIED" if old else "ADDED", resource, key, stored, old))
        return copy.deepcopy(stored)

    def remove(self, resource: str, key: Key) -> Obj:
        """Delete the object; the DELETED event carries its last state with the deletion's resourceVersion."""
        revisions = self._objects.get(resource, {}).get(key)
        if not revisions or revisions[-1].obj is None:
            raise KeyError(key)
        old = revisions[-1].obj
        assert old is not None
        self._revision += 1
        last = copy.deepcopy(old)
        last["metadata"]["resourceVersion"] = str(self._revision)
        revisions.append(_Revision(self._revision, None))
        self._publish(WatchEvent(self._revision, "DELETED", resource, key, last, old))
        return copy.deepcopy(last)

    def compact(self, revision: int | None = None) -> int:
        """Forget revisions older than `revision` (default: now), keeping each object's state at it."""
        target = self._revision if revision is None else min(revision, self._revision)
        if target <= self._compacted:
            return self._compacted
        for resource, by_key in self._objects.items():
            gone: list[Key] = []
            for key, revisions in by_key.items():
                keep_from = 0
                for index, entry in enumerate(revisions):
                    if entry.revision <= target:
                        keep_from = index
                del revisions[:keep_from]
                if len(revisions) == 1 and revisions[0].obj is None and revisions[0].revision <= target:
                    gone.append(key)
            for key in gone:
                del by_key[key]
                keys = self._sorted_keys[resource]
                del keys[bisect.bisect_left(keys, key)]
        cut = bisect.bisect_right(self._event_revisions, target)
        del self._events[:cut]
        del self._event_revisions[:cut]
        self._compacted = target
        return target

    # ------------------------------------------------------------------------------------------- watching

    def events_since(self, revision: int, resource: str | None) -> list[WatchEvent]:
        """Every event after `revision` (for a watch that starts in the past); 410 territory if compacted."""
        if revision < self._compacted:
            raise CompactedError(revision, self._compacted)
        start = bisect.bisect_right(self._event_revisions, revision)
        return [e for e in self._events[start:] if resource is None or e.resource == resource]

    def subscribe(self, resource: str | None) -> Subscription:
        subscription = Subscription(resource)
        self._subscriptions.add(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        self._subscriptions.discard(subscription)
        subscription.closed = True

    def add_listener(self, listener: Callable[[WatchEvent], None]) -> Callable[[], None]:
        """Call `listener` synchronously after every write; returns the function that removes it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def close_watches(self) -> None:
        """End every open watch (the server is stopping, or a test simulates an apiserver restart)."""
        for subscription in list(self._subscriptions):
            self._end(subscription)

    def _publish(self, event: WatchEvent) -> None:
        self._events.append(event)
        self._event_revisions.append(event.revision)
        for subscription in list(self._subscriptions):
            if subscription.resource is not None and subscription.resource != event.resource:
                continue
            try:
                subscription.queue.put_nowait(event)
            except asyncio.QueueFull:
                self._end(subscription)
        for listener in list(self._listeners):
            listener(event)

    def _end(self, subscription: Subscription) -> None:
        self._subscriptions.discard(subscription)
        subscription.closed = True
        while True:
            try:
                subscription.queue.put_nowait(None)
                return
            except asyncio.QueueFull:
                subscription.queue.get_nowait()
