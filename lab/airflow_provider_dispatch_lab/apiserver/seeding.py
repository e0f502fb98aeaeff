"""Bulk seeding for benchmarks: many objects from one template, through the API server's own write path.

A benchmark of the drain check needs namespaces of 10,000 and 50,000 pods. Creating them one request at a
time through a client is setup, not what is measured, and costs minutes; this lab-only endpoint creates them
inside the server instead, but through exactly the code a `POST` and a `PUT .../status` run, so every seeded
object is what the API would have stored (server-owned metadata, defaulting, pruning, the pod admission
defaults, schema validation, admission plugins, one resourceVersion per write, watch events):

    POST /lab/seed
    {"path": "/api/v1/namespaces/bench/pods",     a collection, as a create is addressed
     "template": {...},                           the object; its `status`, if any, is written after the create
     "count": 1000, "start": 0, "groupSize": 16,  objects `start` .. `start + count - 1`
     "fieldManager": "lab-seed"}                  optional: the manager the writes are recorded under

In every string of the template (keys and values) `{i}` becomes the object's index and `{g}` its group,
`index // groupSize`, so one template gives pods of many TrainJobs (`bg-{g}`) with unique names.

Each object is created as `LabApiServer._create` creates one (`strategy.prepare_create`, the schema's
`default` and `prune`, then `_store_new`: namespace lifecycle, AlreadyExists, admission and validation, the
store), and its status is written as the kubelet's `PUT /status` is (`_write_existing` with the `status`
subresource). The server's private methods are called on purpose: a second copy of that path could drift from
the one the API serves. Authorization is asked as for the two requests (`create`, `update` on `status`).

Bad input writes nothing: before the first write the first object is dry-run through both steps (create and
status, with the validation each runs), and every name the batch would take is checked to be unused and unique.
Objects differ only where `{i}` and `{g}` are filled in; should the API still refuse a later one (a value grown
past a length limit), the batch stops there, the objects before it stay written, and the Status names the index.
The answer is `{"kind": "LabSeedResult", "created": N, "resourceVersion": "<after the last write>"}`. The loop
is yielded every few hundred objects, so the lab keeps answering other requests while it seeds.

Register it only on labs that benchmarks run (`AsyncLab(middlewares=(meter.middleware, seeder.middleware))`,
then `seeder.bind(lab.server)`); the default lab has no such path, like a real cluster.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from aiohttp import web

from airflow_provider_dispatch_lab.apiserver import errors
from airflow_provider_dispatch_lab.apiserver.auth.auth import UserInfo
from airflow_provider_dispatch_lab.apiserver.errors import ApiError
from airflow_provider_dispatch_lab.apiserver.registry import strategy
from airflow_provider_dispatch_lab.apiserver.registry.resources import ResourceType
from airflow_provider_dispatch_lab.apiserver.requests import RequestInfo, parse_request
from airflow_provider_dispatch_lab.apiserver.server import USER_KEY, LabApiServer

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Obj = dict[str, Any]

SEED_PATH: Final = "/lab/seed"
MAX_COUNT: Final = 100_000
_YIELD_EVERY: Final = 200


def render(value: Any, index: int, group_size: int) -> Any:
    """`value` with `{i}` and `{g}` filled in, in every string, keys included; a new object."""
    if isinstance(value, str):
        return value.replace("{i}", str(index)).replace("{g}", str(index // group_size))
    if isinstance(value, dict):
        return {render(key, index, group_size): render(item, index, group_size) for key, item in value.items()}
    if isinstance(value, list):
        return [render(item, index, group_size) for item in value]
    return copy.copy(value)


@dataclass(frozen=True)
class SeedRequest:
    """A validated `/lab/seed` body."""

    info: RequestInfo
    template: Obj
    count: int
    start: int
    group_size: int
    field_manager: str = "lab-seed"
    """The manager the writes are recorded under in managedFields, as a request's `fieldManager`."""

    @classmethod
    def parse(cls, body: Any) -> SeedRequest:
        if not isinstance(body, dict):
            raise errors.bad_request("the body of /lab/seed must be an object with path, template and count")
        path, template = body.get("path"), body.get("template")
        if not isinstance(path, str) or not path.startswith("/"):
            raise errors.bad_request("path must be the API path of a collection, e.g. /api/v1/namespaces/ns/pods")
        if not isinstance(template, dict):
            raise errors.bad_request("template must be an object")
        numbers = {}
        for key, default, low, high in (
            ("count", None, 1, MAX_COUNT),
            ("start", 0, 0, None),
            ("groupSize", 1, 1, None),
        ):
            value = body.get(key, default)
            if isinstance(value, bool) or not isinstance(value, int) or value < low or (high and value > high):
                limit = f"between {low} and {high}" if high else f"at least {low}"
                raise errors.bad_request(f"{key} must be an integer {limit}, not {value!r}")
            numbers[key] = value
        info = parse_request("POST", path, False)
        if not info.is_resource or info.name is not None or info.subresource is not None:
            raise errors.bad_request(f"path {path} is not the collection of a resource; seed creates into one")
        manager = body.get("fieldManager", "lab-seed")
        if not isinstance(manager, str) or not manager:
            raise errors.bad_request(f"fieldManager must be a non-empty string, not {manager!r}")
        return cls(info, template, numbers["count"], numbers["start"], numbers["groupSize"], manager)

    def rendered(self, index: int) -> Obj:
        result = render(self.template, index, self.group_size)
        assert isinstance(result, dict)
        return result

    @property
    def indices(self) -> range:
        return range(self.start, self.start + self.count)


class BulkSeeder:
    """The `/lab/seed` endpoint, as a middleware of the lab's server (bind it to the server before start)."""

    def __init__(self) -> None:
        self._server: LabApiServer | None = None

    def bind(self, server: LabApiServer) -> BulkSeeder:
        self._server = server
        return self

    @property
    def server(self) -> LabApiServer:
        if self._server is None:
            raise RuntimeError("BulkSeeder.bind(server) was not called")
        return self._server

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path.rstrip("/") != SEED_PATH:
            return await handler(request)
        if request.method != "POST":
            raise errors.method_not_supported("lab/seed", "", request.method.lower())
        try:
            body = await request.json()
        except ValueError as error:
            raise errors.bad_request(f"the body of /lab/seed is not JSON: {error}") from error
        seed = SeedRequest.parse(body)
        created = await self.seed(seed, request[USER_KEY])
        result = {"kind": "LabSeedResult", "created": created, "resourceVersion": str(self.server.store.revision)}
        return web.json_response(result, status=201)

    # --- the seeding ------------------------------------------------------------------------------------------

    def _resource(self, seed: SeedRequest, user: UserInfo) -> ResourceType:
        info = seed.info
        resource = self.server.registry.by_path(info.group, info.version, info.resource)
        if resource is None:
            raise ApiError(404, "NotFound", f"the server could not find the requested resource {info.path}", {})
        if "create" not in resource.verbs:
            raise errors.method_not_supported(resource.plural, resource.group, "create")
        if resource.namespaced != (info.namespace is not None):
            raise errors.bad_request(f"path {info.path} does not match the scope of {resource.plural}")
        checks = [info]
        if "status" in seed.template and "status" in resource.subresources:
            status = RequestInfo(
                True, info.path, "update", info.group, info.version, info.resource, info.namespace, None, "status"
            )
            checks.append(status)
        for check in checks:
            decision = self.server.authorizer.authorize(user, check)
            if not decision.allowed:
                what = check.resource + (f"/{check.subresource}" if check.subresource else "")
                raise errors.forbidden(user.name, check.verb, what, check.group, check.namespace, None, decision.reason)
        return resource

    def _names_are_free(self, seed: SeedRequest, resource: ResourceType) -> None:
        if "name" not in (seed.template.get("metadata") or {}):
            return  # generateName: the server picks unused names
        seen: set[str] = set()
        for index in seed.indices:
            name = render(seed.template["metadata"]["name"], index, seed.group_size)
            if name in seen:
                raise errors.bad_request(
                    f"the template gives two objects the name {name!r}; put {{i}} in metadata.name so that each "
                    "object gets its own"
                )
            seen.add(name)
            if self.server.store.get(resource.qualified, (seed.info.namespace or "", name)) is not None:
                raise errors.already_exists(resource.plural, resource.group, name)

    async def _one(
        self, resource: ResourceType, seed: SeedRequest, index: int, user: UserInfo, *, dry_run: bool
    ) -> None:
        """One object: the create as `LabApiServer._create` runs it, then the status as `PUT /status` writes it."""
        server, namespace = self.server, seed.info.namespace
        body = seed.rendered(index)
        status = body.get("status") if "status" in resource.subresources else None
        obj = strategy.prepare_create(resource, body, namespace, server.clock)
        resource.schema.default(obj)
        resource.schema.prune(obj)
        if not obj["metadata"].get("name"):
            raise errors.bad_request("the template has neither metadata.name nor metadata.generateName")
        stored = await server._store_new(resource, namespace, obj, user, dry_run, manager=seed.field_manager)
        if status is None:
            return

        def change(current: Obj) -> Obj:
            current["status"] = copy.deepcopy(status)
            return current

        name = stored["metadata"]["name"]
        if not dry_run:
            await server._write_existing(
                resource, namespace, name, "status", change, user, dry_run=False, manager=seed.field_manager
            )
            return
        # Dry run: what `_write_existing` would admit, against the object the create would have stored.
        new = strategy.prepare_update(resource, change(copy.deepcopy(stored)), stored, "status")
        await server._admit("UPDATE", resource, "status", new, stored, user, True)

    async def seed(self, seed: SeedRequest, user: UserInfo) -> int:
        """Create the objects; returns how many. Refused as a whole (nothing written) when the first fails."""
        resource = self._resource(seed, user)
        self._names_are_free(seed, resource)
        await self._one(resource, seed, seed.start, user, dry_run=True)
        created = 0
        for index in seed.indices:
            try:
                await self._one(resource, seed, index, user, dry_run=False)
            except ApiError as error:
                error.message = f"object {index} (after {created} created): {error.message}"
                raise
            created += 1
            if created % _YIELD_EVERY == 0:
                await asyncio.sleep(0)  # let the lab answer other requests and its clock tick
        return created


def seed_body(
    path: str, template: Mapping[str, Any], count: int, *, start: int = 0, group_size: int = 1
) -> dict[str, Any]:
    """The `/lab/seed` request body, for a client."""
    return {"path": path, "template": dict(template), "count": count, "start": start, "groupSize": group_size}


__all__ = ["MAX_COUNT", "SEED_PATH", "BulkSeeder", "SeedRequest", "render", "seed_body"]
