"""The API server, in memory, as far as dispatch's programs and the simulated controllers use it.

One process, no HTTP: `respond(request)` answers a program's `Request` (the driver contract of
`dispatch/programs/`) as the lab's API server does, and the controllers call the same store directly. What is
kept, each as the lab's API server does it (the citations are the lab's,
`lab/airflow_provider_dispatch_lab/apiserver/**`):

- objects with a `uid`, `creationTimestamp`, a `resourceVersion` from one global revision counter, and
  `managedFields` entries timed per manager and subresource (`managedfieldsupdater.go`: an entry's `time` is
  written at each write of its manager; dispatch's settle reads them, `evidence.spec_changed_at`);
- a PUT is conditional on `metadata.resourceVersion` (409 Conflict when stale, 404 when gone); POST refuses an
  existing name (409 AlreadyExists) and names `generateName` objects (a counter here, not 5 random characters, so
  that a replay names the same pods);
- list with equality label selectors and existence (`k`), resourceVersion unset (the current state), or
  `resourceVersion=R&resourceVersionMatch=Exact` (the state at revision R, from the store's history: the pinned
  list), `limit`/`continue` pinned to the first page's revision (`storage/listing.py`);
- DELETE (`registry/deletion.py`, research k8s-apis §5.2, §6 rule 7): only pods delete gracefully, grace forced
  to 0 for a pod not scheduled or already terminal, a later DELETE only shortens it; grace 0 without finalizers
  removes the object at once, with finalizers it stays with a deletionTimestamp until the last one goes;
- `/version`'s `Date` (`transport.server_time`), with whole seconds as an HTTP date has them, on the clock of
  the replica that answered: each request is served by one of the API server's replicas, whose clocks may
  differ by a bounded skew (issue 26, finding 5); every time the store writes comes from that replica's clock.

Left out: admission (webhooks, policies: the ValidatingAdmissionPolicy of the pod fence reads as not installed,
404), validation and defaulting beyond what the controllers write themselves, watches (the controllers read the
store directly), RBAC, patches (controllers mutate, each write is still one revision and one event).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from datetime import UTC, datetime
from typing import Any

from airflow_provider_dispatch.dispatch import programs as p
from airflow_provider_dispatch_lab.apiserver.storage.store import WatchEvent

Obj = dict[str, Any]
Key = tuple[str, str, str]
"""(resource plural, namespace or "", name)."""

#: the pseudo-resource of `Store.versions` whose version is that of the last creation or removal of any object
MEMBERSHIP = "(membership)"
#: lab seconds of the virtual clock's zero (2027-01-15T08:00:00Z): any fixed instant serves
EPOCH = 1_800_000_000.0
TRAINJOBS_EVENT_RESOURCE = "trainjobs.trainer.kubeflow.org"


def stamp(seconds: float) -> str:
    """RFC 3339 with whole seconds, as `metav1.Time` is serialised."""
    return datetime.fromtimestamp(int(EPOCH + seconds), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def not_found(what: str) -> p.ApiFailure:
    return p.ApiFailure(404, {"kind": "Status", "reason": "NotFound", "message": f"{what} not found", "code": 404})


def conflict(what: str, reason: str = "Conflict") -> p.ApiFailure:
    return p.ApiFailure(409, {"kind": "Status", "reason": reason, "message": what, "code": 409})


def _selector(text: str | None) -> Callable[[Mapping[str, str]], bool]:
    """An equality-based label selector (`k=v`, `k==v`, `k!=v`, `k`, comma-separated: all must hold)."""
    tests: list[tuple[str, str, str | None]] = []
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        if "!=" in part:
            key, value = part.split("!=", 1)
            tests.append(("!=", key, value))
        elif "=" in part:
            key, value = part.replace("==", "=").split("=", 1)
            tests.append(("=", key, value))
        else:
            tests.append(("exists", part, None))

    def matches(labels: Mapping[str, str]) -> bool:
        for op, key, value in tests:
            if op == "!=" and labels.get(key) == value:
                return False
            if op == "=" and labels.get(key) != value:
                return False
            if op == "exists" and key not in labels:
                return False
        return True

    return matches


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


_ATOMS = frozenset({str, int, float, bool, type(None)})


def clone(value: Any) -> Any:
    """A deep copy of a JSON-shaped value (dicts, lists, strings, numbers, booleans, None), several times faster
    than `copy.deepcopy`, which the search spent a third of its time in; anything else (a tuple, a set, a
    subclass) goes to `copy.deepcopy`. It differs from `copy.deepcopy` in one way: a dict or list that occurs twice
    in `value` is copied twice, not once and shared (an object that crossed the API server as JSON shares nothing
    either)."""
    kind = type(value)
    if kind is dict:
        return {key: clone(item) for key, item in value.items()}
    if kind is list:
        return [clone(item) for item in value]
    if kind in _ATOMS:
        return value
    return copy.deepcopy(value)


@dataclass
class Store:
    """The objects, their history (for pinned lists) and the virtual clock the API server's replicas read."""

    now: Callable[[], float]
    replica: Callable[[], float]
    """The clock offset of the replica serving the next request (drawn by the world's seeded RNG)."""
    listener: Callable[[WatchEvent], None] | None = None
    objects: dict[Key, Obj] = field(default_factory=dict)
    history: dict[str, list[tuple[int, Key, Obj | None]]] = field(default_factory=dict)
    revision: int = 1
    _uids: int = 0
    _names: int = 0
    by_resource: dict[str, dict[Key, Obj]] = field(default_factory=dict)
    """`objects` by resource, in `objects`' order (each is kept by the same insertions and removals): `items`
    reads one resource without scanning them all."""
    versions: dict[str, int] = field(default_factory=dict)
    """The revision of each resource's last write: a reader that derives something from one resource's objects
    may keep it while this stays the same (objects are never changed in place, a write replaces them)."""

    # --- the clock ------------------------------------------------------------------------------------------

    def server_time(self) -> str:
        """What the replica answering now writes as the time (whole seconds)."""
        return stamp(self.now() + self.replica())

    # --- reads ----------------------------------------------------------------------------------------------

    def get(self, key: Key) -> Obj | None:
        return self.objects.get(key)

    def items(self, resource: str, namespace: str | None = None) -> list[Obj]:
        objects = self.by_resource.get(resource)
        if not objects:
            return []
        if namespace is None:
            return list(objects.values())
        return [obj for (_, ns, _), obj in objects.items() if ns == namespace]

    def version(self, resource: str) -> int:
        """The revision of `resource`'s last write (0: none yet)."""
        return self.versions.get(resource, 0)

    def last_write(self, resources: tuple[str, ...]) -> int:
        """The revision of the last write of any of `resources`: it changes when one of them is written (each write
        takes a revision greater than every earlier one), so it can stand for all their versions in a key."""
        versions = self.versions
        return max([versions.get(resource, 0) for resource in resources])

    def _snapshot(self, resource: str, namespace: str, at: int) -> list[Obj]:
        latest: dict[Key, Obj | None] = {}
        for revision, key, obj in self.history.get(resource, ()):
            if revision > at:
                break
            if key[1] == namespace:
                latest[key] = obj
        return [obj for _, obj in sorted(latest.items()) if obj is not None]

    # --- writes ---------------------------------------------------------------------------------------------

    def _commit(self, key: Key, obj: Obj | None, old: Obj | None, manager: str, status: bool) -> None:
        self.revision += 1
        kind = "DELETED" if obj is None else ("ADDED" if old is None else "MODIFIED")
        if obj is not None:
            metadata = obj["metadata"]
            metadata["resourceVersion"] = str(self.revision)
            at = self.server_time()
            entries = [
                e
                for e in metadata.get("managedFields") or ()
                if (e.get("manager"), e.get("subresource", "")) != (manager, "status" if status else "")
            ]
            entry = {"manager": manager, "operation": "Update", "time": at}
            if status:
                entry["subresource"] = "status"
            metadata["managedFields"] = [*entries, entry]
            self.objects[key] = obj
            self.by_resource.setdefault(key[0], {})[key] = obj
        else:
            self.objects.pop(key, None)
            self.by_resource.get(key[0], {}).pop(key, None)
        self.versions[key[0]] = self.revision
        if old is None or obj is None:
            self.versions[MEMBERSHIP] = self.revision
        self.history.setdefault(key[0], []).append((self.revision, key, obj))
        if self.listener is not None and key[0] in ("pods", "trainjobs"):
            resource = TRAINJOBS_EVENT_RESOURCE if key[0] == "trainjobs" else "pods"
            last = obj if obj is not None else old
            assert last is not None
            self.listener(WatchEvent(self.revision, kind, resource, key, last, old))  # type: ignore[arg-type]

    def create(self, resource: str, namespace: str, body: Mapping[str, Any], manager: str) -> Obj | p.ApiFailure:
        obj: Obj = clone(dict(body))
        metadata = obj.setdefault("metadata", {})
        if not metadata.get("name") and metadata.get("generateName"):
            self._names += 1
            metadata["name"] = f"{metadata['generateName']}{self._names:05d}"
        key = (resource, namespace, str(metadata["name"]))
        if key in self.objects:
            return conflict(f"{resource} {metadata['name']} already exists", "AlreadyExists")
        self._uids += 1
        if namespace:
            metadata["namespace"] = namespace
        metadata["uid"] = f"uid-{self._uids:05d}"
        metadata["creationTimestamp"] = self.server_time()
        metadata["generation"] = 1
        for server_field in ("deletionTimestamp", "deletionGracePeriodSeconds", "resourceVersion"):
            metadata.pop(server_field, None)
        self._commit(key, obj, None, manager, False)
        return obj

    def replace(self, resource: str, body: Mapping[str, Any], manager: str) -> Obj | p.ApiFailure:
        """A PUT: conditional on the body's resourceVersion; server-set metadata kept."""
        metadata = body.get("metadata") or {}
        key = (resource, str(metadata.get("namespace") or ""), str(metadata.get("name")))
        old = self.objects.get(key)
        if old is None:
            return not_found(f"{resource} {key[2]}")
        wanted = metadata.get("resourceVersion")
        if wanted is not None and wanted != old["metadata"]["resourceVersion"]:
            return conflict(
                f"Operation cannot be fulfilled on {resource} {key[2]}: the object has been modified; please apply "
                "your changes to the latest version and try again"
            )
        obj: Obj = clone(dict(body))
        for kept in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"):
            if kept in old["metadata"]:
                obj["metadata"][kept] = old["metadata"][kept]
            else:
                obj["metadata"].pop(kept, None)
        obj["metadata"]["managedFields"] = old["metadata"].get("managedFields") or []
        if "status" in old:
            obj["status"] = clone(old["status"])  # the main resource's PUT does not write status
        self._commit(key, obj, old, manager, False)
        return self._maybe_gone(key, manager) or obj

    def mutate(self, key: Key, change: Callable[[Obj], None], manager: str, *, status: bool = False) -> bool:
        """A controller's write of the object as it is now (a patch, or an update it re-reads on conflict):
        `change` edits a copy; False when the object is gone."""
        old = self.objects.get(key)
        if old is None:
            return False
        obj = clone(old)
        change(obj)
        self._commit(key, obj, old, manager, status)
        self._maybe_gone(key, manager)
        return True

    def delete(self, key: Key, manager: str, grace: float | None = None) -> bool:
        """DELETE with `grace` (None: the pod's own `terminationGracePeriodSeconds`), module docstring."""
        old = self.objects.get(key)
        if old is None:
            return False
        obj = clone(old)
        metadata = obj["metadata"]
        if key[0] == "pods":
            spec, phase = obj.get("spec") or {}, (obj.get("status") or {}).get("phase")
            period = float(spec.get("terminationGracePeriodSeconds", 30) if grace is None else grace)
            if metadata.get("deletionTimestamp") is None and (
                not spec.get("nodeName") or phase in ("Succeeded", "Failed")
            ):
                period = 0.0
        else:
            period = 0.0
        current = metadata.get("deletionGracePeriodSeconds")
        if current is not None and period >= float(current):
            return True  # graceful deletion pending: only a shorter grace changes anything
        if period == 0 and not metadata.get("finalizers"):
            self._commit(key, None, old, manager, False)
            return True
        metadata["deletionTimestamp"] = stamp(self.now() + self.replica() + period)
        metadata["deletionGracePeriodSeconds"] = int(period)
        metadata["generation"] = int(metadata.get("generation") or 1) + 1
        self._commit(key, obj, old, manager, False)
        return True

    def _maybe_gone(self, key: Key, manager: str) -> Obj | None:
        """A deleted object whose last finalizer went and whose grace is over (0) leaves the store."""
        obj = self.objects.get(key)
        if obj is None:
            return None
        metadata = obj["metadata"]
        if metadata.get("deletionTimestamp") is None or metadata.get("finalizers"):
            return None
        if key[0] == "pods" and metadata.get("deletionGracePeriodSeconds") not in (0, None):
            return None
        self._commit(key, None, obj, manager, False)
        return obj

    # --- the programs' driver -------------------------------------------------------------------------------

    def respond(self, request: p.Request, manager: str = "dispatch") -> p.Response:
        """One request of a dispatch program, answered as the API server would (module docstring)."""
        if isinstance(request, p.ServerTime):
            return {"date": self.server_time()}
        if isinstance(request, p.GetNode):
            found = self.objects.get(("nodes", "", request.name))
            return clone(found) if found is not None else not_found(f'nodes "{request.name}"')
        if isinstance(request, p.GetObject):
            found = self.objects.get((request.coords.plural, request.namespace or "", request.name))
            if found is None:
                return not_found(f'{request.coords.plural} "{request.name}"')
            copied: Obj = clone(found)
            return copied
        if isinstance(request, p.ListObjects):
            return self._list(request)
        if isinstance(request, p.ReplaceObject):
            answer = self.replace(request.coords.plural, request.body, manager)
            return answer if isinstance(answer, p.ApiFailure) else clone(answer)
        if isinstance(request, p.CreateObject):
            answer = self.create(request.coords.plural, request.namespace, request.body, manager)
            return answer if isinstance(answer, p.ApiFailure) else clone(answer)
        raise TypeError(f"no answer for {request!r}")

    def _list(self, request: p.ListObjects) -> p.Response:
        resource, namespace = request.coords.plural, request.namespace or ""
        if request.continue_:
            at_text, _, offset_text = request.continue_.partition(":")
            at, offset = int(at_text), int(offset_text)
            selector = _selector(request.label_selector)
            items = [o for o in self._snapshot(resource, namespace, at) if selector(_labels(o))]
        elif request.resource_version is not None and request.resource_version_match == "Exact":
            at, offset = int(request.resource_version), 0
            selector = _selector(request.label_selector)
            items = [o for o in self._snapshot(resource, namespace, at) if selector(_labels(o))]
        else:
            at, offset = self.revision, 0
            selector = _selector(request.label_selector)
            items = sorted(self.items(resource, namespace), key=lambda o: str(o["metadata"]["name"]))
            items = [o for o in items if selector(_labels(o))]
        limit = request.limit or len(items) or 1
        page = items[offset : offset + limit]
        metadata: Obj = {"resourceVersion": str(at)}
        if offset + limit < len(items):
            metadata["continue"] = f"{at}:{offset + limit}"
        return {"kind": "List", "metadata": metadata, "items": clone(page)}


# --- derived values kept while what they were derived from stays the same -----------------------------------------


def describe(value: Any, depth: int = 0) -> Any:
    """A comparable account of `value` for `Memo`'s check: functions by their code and what they captured
    (defaults and closure cells), dataclasses (an action) field by field, dicts, lists and tuples item by item, any
    other object by its identity (the world, a generator: the same object either way)."""
    if depth > 200:
        return ("deep", id(value))
    kind = type(value)
    if kind in _ATOMS:
        return value
    if kind is dict:
        return {key: describe(item, depth + 1) for key, item in value.items()}
    if kind in (list, tuple):
        return (kind.__name__, [describe(item, depth + 1) for item in value])
    if callable(value) and hasattr(value, "__code__"):
        cells = [cell.cell_contents for cell in value.__closure__ or ()]
        return (
            "function",
            value.__qualname__,
            describe(value.__defaults__ or (), depth + 1),
            describe(cells, depth + 1),
        )
    if is_dataclass(value) and not isinstance(value, type):
        return (kind.__name__, [describe(getattr(value, f.name), depth + 1) for f in fields(value)])
    return ("object", kind.__name__, id(value))


@dataclass
class Memo:
    """Values derived from the store (a controller's enabled actions) kept while their key (the versions of the
    resources they read, and whatever else they read) stays the same: the search rebuilt every controller's actions
    at every step, most of it from objects that had not changed since the step before.

    Exact only if the key names everything the derivation reads and the derivation draws nothing from an RNG;
    `check` (the environment's `SIM_CHECK_MEMO=1`, `fingerprint.py --check-memo`) derives again at every hit and
    raises if the result (`describe`) or the `watch`ed state (the RNGs) differs: run it after changing a
    memoised controller."""

    check: bool = field(default_factory=lambda: os.environ.get("SIM_CHECK_MEMO") == "1")
    watch: Callable[[], object] | None = None
    held: dict[str, tuple[Hashable, Any]] = field(default_factory=dict)
    hits: int = 0
    misses: int = 0

    def get(self, name: str, key: Hashable, derive: Callable[[], Any]) -> Any:
        held = self.held.get(name)
        if held is not None and held[0] == key:
            self.hits += 1
            if self.check:
                before = self.watch() if self.watch is not None else None
                again = derive()
                if self.watch is not None and self.watch() != before:
                    raise AssertionError(f"memo {name}: the derivation draws from an RNG; it cannot be kept")
                if describe(again) != describe(held[1]):
                    raise AssertionError(f"memo {name}: derived again under the same key {key!r}, it differs")
            return held[1]
        self.misses += 1
        value = derive()
        self.held[name] = (key, value)
        return value
