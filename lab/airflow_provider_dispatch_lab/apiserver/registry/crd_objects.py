"""The lab's CustomResourceDefinitions as objects of its API, read-only: what `kubectl get crd` lists.

The lab serves the custom resources of the upstream CRD files in `lab/crds/` (`resources.py`); a cluster also
serves the CRDs themselves (`apiextensions.k8s.io/v1 customresourcedefinitions`), and kubectl users look there
first. The lab serves them for reading only (get, list, watch): they are package data, fixed for the lab's life,
so a create, update, patch or delete is answered 405 `MethodNotAllowed`, not taken on.

Each object is the file's CRD as apiextensions-apiserver v0.36.3 would store it after installing it: the spec
as the file has it, defaulted (`names.singular`, `names.listKind`, `conversion.strategy: None`), except that a
version the lab does not serve says `served: false` (only the storage version is served: `resources.py`; the
Kueue files declare v1beta1 served too, which works only with the conversion webhook a real install patches in);
and the status its controllers write once the names are accepted (`pkg/controller/status/naming_controller.go`:
`NamesAccepted` True `NoConflicts` "no conflicts found"; `pkg/controller/establish/establishing_controller.go`:
`Established` True `InitialNamesAccepted` "the initial names have been accepted"), with `acceptedNames` and
`storedVersions`. Their creationTimestamp is the lab's start, as the CRDs are installed before anything uses them.

The objects go into the store on the first request for the kind (`CrdObjects.middleware`, which every lab runs),
not at start: copying the four megabytes of schemas into the store costs a quarter of a second, which a lab that
no one asks about its CRDs (most of the test suite's) need not pay.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from typing import Any, Final

from aiohttp import web

from airflow_provider_dispatch_lab.apiserver.registry.resources import Registry, load_crds
from airflow_provider_dispatch_lab.apiserver.registry.strategy import prepare_create
from airflow_provider_dispatch_lab.apiserver.storage.store import Store
from airflow_provider_dispatch_lab.clock import LabClock

Obj = dict[str, Any]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

GROUP: Final = "apiextensions.k8s.io"
PLURAL: Final = "customresourcedefinitions"
_PATH_PREFIX: Final = f"/apis/{GROUP}/"


def _condition(kind: str, reason: str, message: str, at: str) -> Obj:
    return {"type": kind, "status": "True", "lastTransitionTime": at, "reason": reason, "message": message}


def crd_object(document: Obj, at: str) -> Obj:
    """The stored form of one CRD file's document, installed at `at` (module docstring)."""
    crd = copy.deepcopy(document)
    spec = crd["spec"]
    names = spec["names"]
    names.setdefault("singular", str(names["kind"]).lower())
    names.setdefault("listKind", f"{names['kind']}List")
    spec.setdefault("conversion", {"strategy": "None"})
    storage = [v["name"] for v in spec["versions"] if v.get("storage")]
    for version in spec["versions"]:
        version["served"] = bool(version.get("served", True) and version.get("storage"))
    crd["status"] = {
        "conditions": [
            _condition("NamesAccepted", "NoConflicts", "no conflicts found", at),
            _condition("Established", "InitialNamesAccepted", "the initial names have been accepted", at),
        ],
        "acceptedNames": copy.deepcopy(names),
        "storedVersions": storage,
    }
    return crd


class CrdObjects:
    """Puts the CRD objects into the store on the first request for them (module docstring)."""

    def __init__(self, store: Store, registry: Registry, clock: LabClock) -> None:
        self._store = store
        self._registry = registry
        self._clock = clock
        self._installed_at = clock.timestamp()
        self._installed = False

    def install(self) -> None:
        resource = self._registry.by_path(GROUP, "v1", PLURAL)
        if self._installed or resource is None:
            return
        self._installed = True
        for document in load_crds():
            obj = prepare_create(resource, crd_object(document, self._installed_at), None, self._clock)
            obj["metadata"]["creationTimestamp"] = self._installed_at
            self._store.put(resource.qualified, ("", obj["metadata"]["name"]), obj)

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if not self._installed and request.path.startswith(_PATH_PREFIX) and PLURAL in request.path.split("/"):
            self.install()
        return await handler(request)


__all__ = ["GROUP", "PLURAL", "CrdObjects", "crd_object"]
