"""The garbage collector: ownerReferences, and the three propagation policies.

`kubernetes/kubernetes:pkg/controller/garbagecollector/garbagecollector.go`, with the graph builder
(`graph_builder.go`) reduced to two indexes over informer caches (uid -> object, owner uid -> dependents):

- `attemptToDeleteItem`: read the dependent live; each owner is looked up (cache first, then a live GET by
  name, matching the uid: a missing owner or another uid is "dangling"). An owner being deleted in the
  foreground (deletionTimestamp and the `foregroundDeletion` finalizer) is "waiting for dependents".
  With at least one solid owner, only the dangling and waiting references are removed (a JSON merge patch
  of `ownerReferences` with the resourceVersion as precondition). Otherwise the dependent is deleted:
  in the foreground if a waiting owner exists and it has dependents itself, else with the policy its own
  finalizers ask for (`orphan`, `foregroundDeletion`), else Background. Deletes carry a uid precondition.
- `processDeletingDependentsItem`: an owner in foreground deletion loses the `foregroundDeletion`
  finalizer once no dependent with `blockOwnerDeletion: true` is left; until then its blocking dependents
  are queued for deletion. Dependents still Terminating (a pod in its grace period) keep blocking it.
- `attemptToOrphan` / `orphanDependents`: an owner with the `orphan` finalizer has its reference removed
  from every dependent, then loses the finalizer.
- Background is just the first rule applied to the dependents of an owner that is gone: the graph builder
  queues an object's dependents when it disappears, and every new object that has owners.

The apiserver side (`lab/apiserver/registry/deletion.py`) adds the policy finalizers. An owner whose kind the collector
does not know (no coordinates) is never treated as dangling: upstream fails the REST mapping and retries. Not
reproduced: the dependency cycle detection (unblocking owner references), `DeleteOptions.orphanDependents`
quirks beyond what the apiserver side does, the 30-second resync of the monitors, namespaced dependents of
cluster-scoped owners through a namespaced reference (invalid upstream, ignored here).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from airflow_provider_dispatch.dispatch.vocabulary import ApiCoordinates
from airflow_provider_dispatch_lab.client import ApiStatusError, Informer, is_not_found
from airflow_provider_dispatch_lab.kinds import JOB, JOBSET, LEASE, NODE, POD, TRAINJOB, WORKLOAD
from airflow_provider_dispatch_lab.simulated.cluster import ClusterContext
from airflow_provider_dispatch_lab.simulated.objects import is_deleting, key_of, meta, uid_of
from airflow_provider_dispatch_lab.simulated.queue_controller import QueueController, RetryLater, work
from airflow_provider_dispatch_lab.simulated.work_queue import KeyedQueue

Obj = dict[str, Any]
Item = tuple[str, str, str]
"""(resource, namespace, name): `coords.resource` names the kind."""

FOREGROUND = "foregroundDeletion"
ORPHAN = "orphan"
DEFAULT_KINDS: tuple[ApiCoordinates, ...] = (TRAINJOB, JOBSET, JOB, POD, WORKLOAD, NODE, LEASE)


def _owner_refs(obj: Obj) -> list[Obj]:
    return [ref for ref in meta(obj).get("ownerReferences") or () if isinstance(ref, dict)]


def _finalizers(obj: Obj) -> list[str]:
    return list(meta(obj).get("finalizers") or ())


def _deleting_dependents(obj: Obj) -> bool:
    return is_deleting(obj) and FOREGROUND in _finalizers(obj)


class GarbageCollector(QueueController[Item]):
    name = "garbage-collector"
    workers = 4

    def __init__(self, ctx: ClusterContext, kinds: Sequence[ApiCoordinates] = DEFAULT_KINDS) -> None:
        super().__init__(ctx)
        self.kinds = {coords.resource: coords for coords in kinds}
        self._by_kind = {(coords.api_version, coords.kind): coords for coords in kinds}
        self.caches: dict[str, Informer] = {}
        self._objects: dict[str, Item] = {}
        self._dependents: dict[str, set[Item]] = {}
        self.orphan_queue: KeyedQueue[Item] = KeyedQueue(ctx.clock)
        for coords in kinds:
            informer = self.informer(coords)
            self.caches[coords.resource] = informer
            informer.on_change(self._handler(coords))

    def extra_workers(self, group: asyncio.TaskGroup) -> None:
        group.create_task(work(f"{self.name}-orphan", self.orphan_queue, self.orphan), name=f"{self.name}-orphan")

    # ----------------------------------------------------------------------------------- the graph

    def _handler(self, coords: ApiCoordinates) -> Any:
        def changed(kind: str, obj: Obj, old: Obj | None) -> None:
            item: Item = (coords.resource, *key_of(obj))
            uid = uid_of(obj)
            old_owners = {ref.get("uid") for ref in _owner_refs(old or {})}
            for ref in _owner_refs(old or {}):
                self._dependents.get(str(ref.get("uid")), set()).discard(item)
            if kind == "DELETED":
                self._objects.pop(uid, None)
                for dependent in self._dependents.pop(uid, set()):
                    self.queue.add(dependent)
                for ref in _owner_refs(obj):
                    owner = self._objects.get(str(ref.get("uid")))
                    if owner is not None:
                        self.queue.add(owner)
                return
            self._objects[uid] = item
            for ref in _owner_refs(obj):
                self._dependents.setdefault(str(ref.get("uid")), set()).add(item)
            new_owners = {ref.get("uid") for ref in _owner_refs(obj)}
            if _owner_refs(obj) and (kind == "ADDED" or new_owners != old_owners):
                self.queue.add(item)
            if _deleting_dependents(obj):
                self.queue.add(item)
                for dependent in self._dependents.get(uid, set()):
                    self.queue.add(dependent)
            if is_deleting(obj) and ORPHAN in _finalizers(obj):
                self.orphan_queue.add(item)

        return changed

    def _cached(self, item: Item) -> Obj | None:
        informer = self.caches.get(item[0])
        return informer.get(item[1] or None, item[2]) if informer else None

    def dependents_of(self, owner: Obj) -> list[Obj]:
        found = (self._cached(item) for item in self._dependents.get(uid_of(owner), set()))
        return [obj for obj in found if obj is not None]

    async def _live(self, coords: ApiCoordinates, namespace: str, name: str) -> Obj | None:
        try:
            return await self.client.get(coords, namespace or None, name)
        except ApiStatusError as error:
            if is_not_found(error):
                return None
            raise

    async def _owner(self, dependent: Obj, ref: Obj) -> Obj | None:
        """The owner a reference names, or None when it is dangling (absent, or another uid)."""
        uid = str(ref.get("uid"))
        item = self._objects.get(uid)
        cached = self._cached(item) if item else None
        if cached is not None and uid_of(cached) == uid:
            return cached
        coords = self._by_kind.get((str(ref.get("apiVersion")), str(ref.get("kind"))))
        if coords is None:
            raise RetryLater(f"no coordinates for owner kind {ref.get('apiVersion')}/{ref.get('kind')}")
        namespace = key_of(dependent)[0] if coords.namespaced else ""
        live = await self._live(coords, namespace, str(ref.get("name")))
        return live if live is not None and uid_of(live) == uid else None

    # ------------------------------------------------------------------------------- deletion

    async def sync(self, item: Item) -> None:
        """`attemptToDeleteItem`."""
        coords = self.kinds[item[0]]
        obj = await self._live(coords, item[1], item[2])
        if obj is None:
            return
        if is_deleting(obj):
            if _deleting_dependents(obj):
                await self._process_deleting_dependents(coords, obj)
            return
        refs = _owner_refs(obj)
        if not refs:
            return
        solid, detach, waiting = [], [], []
        for ref in refs:
            owner = await self._owner(obj, ref)
            if owner is None:
                detach.append(ref)
            elif _deleting_dependents(owner):
                detach.append(ref)
                waiting.append(ref)
            else:
                solid.append(ref)
        if solid:
            if detach:
                await self._remove_owner_refs(coords, obj, {str(ref.get("uid")) for ref in detach})
            return
        if waiting and self.dependents_of(obj):
            policy = "Foreground"
        elif ORPHAN in _finalizers(obj):
            policy = "Orphan"
        elif FOREGROUND in _finalizers(obj):
            policy = "Foreground"
        else:
            policy = "Background"
        await self._delete(coords, obj, policy)

    async def _process_deleting_dependents(self, coords: ApiCoordinates, owner: Obj) -> None:
        uid = uid_of(owner)
        blocking = [
            dependent
            for dependent in self.dependents_of(owner)
            if any(ref.get("uid") == uid and ref.get("blockOwnerDeletion") is True for ref in _owner_refs(dependent))
        ]
        if not blocking:
            await self._remove_finalizer(coords, owner, FOREGROUND)
            return
        for dependent in blocking:
            if not _deleting_dependents(dependent):
                dependent_coords = self._coords_of(dependent)
                if dependent_coords is not None:
                    self.queue.add((dependent_coords.resource, *key_of(dependent)))

    def _coords_of(self, obj: Obj) -> ApiCoordinates | None:
        return self._by_kind.get((str(obj.get("apiVersion")), str(obj.get("kind"))))

    async def _delete(self, coords: ApiCoordinates, obj: Obj, policy: str) -> None:
        try:
            await self.client.delete(coords, *_scope(coords, obj), propagation_policy=policy, uid=uid_of(obj))
        except ApiStatusError as error:
            if not is_not_found(error):
                raise

    # -------------------------------------------------------------------------------- orphaning

    async def orphan(self, item: Item) -> None:
        """`attemptToOrphanWorker`: detach every dependent, then drop the `orphan` finalizer."""
        coords = self.kinds[item[0]]
        owner = await self._live(coords, item[1], item[2])
        if owner is None or not is_deleting(owner) or ORPHAN not in _finalizers(owner):
            return
        for dependent in self.dependents_of(owner):
            dependent_coords = self._coords_of(dependent)
            if dependent_coords is not None:
                await self._remove_owner_refs(dependent_coords, dependent, {uid_of(owner)})
        await self._remove_finalizer(coords, owner, ORPHAN)

    # ------------------------------------------------------------------------------------ writes

    async def _remove_owner_refs(self, coords: ApiCoordinates, obj: Obj, uids: set[str]) -> None:
        """`deleteOwnerRefJSONMergePatch`: the remaining references, conditional on the resourceVersion."""
        kept = [ref for ref in _owner_refs(obj) if str(ref.get("uid")) not in uids]
        patch = {"metadata": {"ownerReferences": kept or None, "resourceVersion": meta(obj).get("resourceVersion")}}
        try:
            await self.client.patch(coords, *_scope(coords, obj), patch, patch_type="merge")
        except ApiStatusError as error:
            if not is_not_found(error):
                raise

    async def _remove_finalizer(self, coords: ApiCoordinates, obj: Obj, finalizer: str) -> None:
        fresh = await self._live(coords, *_scope(coords, obj))
        if fresh is None or finalizer not in _finalizers(fresh):
            return
        kept = [f for f in _finalizers(fresh) if f != finalizer]
        patch = {"metadata": {"finalizers": kept or None, "resourceVersion": meta(fresh).get("resourceVersion")}}
        try:
            await self.client.patch(coords, *_scope(coords, fresh), patch, patch_type="merge")
        except ApiStatusError as error:
            if not is_not_found(error):
                raise


def _scope(coords: ApiCoordinates, obj: Obj) -> tuple[str, str]:
    namespace, name = key_of(obj)
    return (namespace if coords.namespaced else "", name)
