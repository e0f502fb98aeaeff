"""The lab's Kubernetes API server: the REST API over HTTP on loopback, for the official clients unchanged.

One aiohttp application serves discovery, and for every registered kind get, list, watch, create, update (PUT),
patch (JSON merge, JSON patch, strategic merge for built-in kinds, server-side apply), delete and
deletecollection, plus the `status` and `binding` subresources and the reviews (`reviews.py`). Each request goes
through the apiserver's stages in the apiserver's order (`apiserver/pkg/server/config.go`
`DefaultBuildHandlerChain`, `apiserver/pkg/endpoints/handlers/*.go`): authentication, authorization, then the
handler: decode, server-owned metadata, admission (mutating), defaulting and schema validation, admission
(validating), and the storage write conditioned on the object's resourceVersion.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any
from wsgiref.handlers import format_date_time

import yaml
from aiohttp import web
from multidict import CIMultiDict

from airflow_provider_dispatch_lab.apiserver import discovery, errors, openapi, protobuf, reviews, tables
from airflow_provider_dispatch_lab.apiserver.auth.auth import AllowAnyone, Authenticator, Authorizer, UserInfo
from airflow_provider_dispatch_lab.apiserver.errors import ApiError
from airflow_provider_dispatch_lab.apiserver.registry import managed_fields, patching, strategy
from airflow_provider_dispatch_lab.apiserver.registry.admission import AdmissionChain, AdmissionRequest, Operation
from airflow_provider_dispatch_lab.apiserver.registry.deletion import DeleteOptions, check_preconditions, decide
from airflow_provider_dispatch_lab.apiserver.registry.resources import Registry, ResourceType
from airflow_provider_dispatch_lab.apiserver.requests import RequestInfo, parse_request, require_name
from airflow_provider_dispatch_lab.apiserver.storage.listing import Filter, list_objects
from airflow_provider_dispatch_lab.apiserver.storage.store import Store
from airflow_provider_dispatch_lab.apiserver.storage.watching import WatchStream
from airflow_provider_dispatch_lab.apiserver.validation import field_validation
from airflow_provider_dispatch_lab.clock import LabClock

Obj = dict[str, Any]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
_CUSTOM_RESOURCE_PATCHES = (JSON_PATCH, MERGE_PATCH, APPLY_PATCH)
_MAX_WRITE_ATTEMPTS = 8
"""`GuaranteedUpdate` retries a write whose object changed underneath it; a conditional write gets a 409."""

USER_KEY = web.RequestKey("user", UserInfo)
INFO_KEY = web.RequestKey("request_info", RequestInfo)
CLOCK_OFFSET_KEY = web.RequestKey("clock_offset", float)
"""Seconds the clock of the replica that answers this request is ahead of the lab clock (negative: behind). A
middleware sets it to stage API server replicas behind a load balancer whose clocks differ (each kube-apiserver
writes its own `time.Now()` into `Date`, Go's `net/http` `Server`): only the `Date` header moves."""


def _status_success(details: Obj | None = None, code: int = 200) -> Obj:
    body: Obj = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code}
    if details:
        body["details"] = details
    return body


def _manager(request: web.Request) -> str:
    """The field manager a create, update or non-apply patch is recorded under (`managed_fields.manager_of`)."""
    return managed_fields.manager_of(request.query.get("fieldManager"), request.headers.get("User-Agent", ""))


def _json(body: Obj, status: int = 200, headers: Mapping[str, str] | None = None) -> web.Response:
    return web.Response(
        body=json.dumps(body, separators=(",", ":")).encode(),
        status=status,
        content_type="application/json",
        headers=headers,
    )


def error_response(error: ApiError) -> web.Response:
    return _json(error.status(), error.code, error.headers)


class LabApiServer:
    """The API server over a store; `application()` is the aiohttp app to run on a loopback site."""

    def __init__(
        self,
        registry: Registry,
        store: Store,
        clock: LabClock,
        *,
        admission: AdmissionChain | None = None,
        authenticator: Authenticator | None = None,
        authorizer: Authorizer | None = None,
        middlewares: Iterable[Any] = (),
        bookmark_interval: float = 60.0,
    ) -> None:
        self.registry = registry
        self.store = store
        self.clock = clock
        self.admission = admission or AdmissionChain()
        self.authenticator: Authenticator = authenticator or AllowAnyone()
        self.authorizer: Authorizer = authorizer or AllowAnyone()
        self.bookmark_interval = bookmark_interval
        self.stale_list_revision: int | None = None
        """When set, `resourceVersion=0` lists are served at this older revision: a stale watch cache."""
        self._middlewares = list(middlewares)

    def application(self) -> web.Application:
        app = web.Application(middlewares=[self._errors_middleware, self._auth_middleware, *self._middlewares])
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        app.on_response_prepare.append(self._date_header)
        return app

    async def _date_header(self, request: web.Request, response: web.StreamResponse) -> None:
        """Every answer's `Date` is the lab clock's, as a real API server's is its clock (Go's net/http sets it
        on every response): clients that judge elapsed time by the server's clock (dispatch's settle) see lab
        time, which may run faster than the wall clock. `CLOCK_OFFSET_KEY` shifts it for one request. And
        `Cache-Control: no-cache, private` unless the answer set one, as the apiserver's `WithCacheControl` filter
        does (k8s.io/apiserver v0.36.3 `pkg/endpoints/filters/cachecontrol.go`): without it kubectl's HTTP cache
        served an earlier answer again."""
        response.headers["Date"] = format_date_time(self.clock.now() + request.get(CLOCK_OFFSET_KEY, 0.0))
        response.headers.setdefault("Cache-Control", "no-cache, private")

    # ---------------------------------------------------------------------------------------- middleware

    @web.middleware
    async def _errors_middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except ApiError as error:
            return error_response(error)
        except web.HTTPException:
            raise
        except Exception as error:  # an unexpected lab bug must still answer as an apiserver would
            return error_response(errors.internal_error(f"{type(error).__name__}: {error}"))

    @web.middleware
    async def _auth_middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        info = parse_request(
            request.method,
            request.path,
            request.query.get("watch", "").lower() in ("true", "1"),
            request.query.get("fieldSelector", ""),
        )
        request[INFO_KEY] = info
        if request.path in ("/healthz", "/livez", "/readyz"):
            return await handler(request)
        user = self.authenticator.authenticate(request.headers.get("Authorization"))
        if user is None:
            raise errors.unauthorized()
        request[USER_KEY] = user
        decision = self.authorizer.authorize(user, info)
        if not decision.allowed:
            if not info.is_resource:
                sentence = f'User "{user.name}" cannot {info.verb} path "{info.path}"'
                if decision.reason:
                    sentence = f"{sentence}: {decision.reason}"
                raise ApiError(403, "Forbidden", f"forbidden: {sentence}", {})
            resource = info.resource + (f"/{info.subresource}" if info.subresource else "")
            raise errors.forbidden(
                user.name, info.verb, resource, info.group, info.namespace, info.name, decision.reason
            )
        return await handler(request)

    # ------------------------------------------------------------------------------------------ routing

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        info = request[INFO_KEY]
        if not info.is_resource:
            return self._non_resource(request, info)
        resource = self.registry.by_path(info.group, info.version, info.resource)
        if resource is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        namespace = info.namespace if resource.namespaced else None
        if not resource.namespaced and info.namespace and resource.kind != "Namespace":
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        if info.subresource and info.subresource not in resource.subresources:
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        user = request[USER_KEY]
        handlers: dict[str, Callable[[], Awaitable[web.StreamResponse]]] = {
            "get": lambda: self._get(request, resource, namespace, require_name(info)),
            "list": lambda: self._list(request, resource, namespace),
            "watch": lambda: self._watch(request, resource, namespace),
            "create": lambda: self._create(request, resource, namespace, info, user),
            "update": lambda: self._update(request, resource, namespace, info, user),
            "patch": lambda: self._patch(request, resource, namespace, info, user),
            "delete": lambda: self._delete(request, resource, namespace, require_name(info), user),
            "deletecollection": lambda: self._delete_collection(request, resource, namespace, user),
        }
        handler = handlers.get(info.verb)
        if handler is None or (info.verb not in resource.verbs and not info.subresource):
            raise errors.method_not_supported(info.resource, info.group, info.verb)
        return await handler()

    def _non_resource(self, request: web.Request, info: RequestInfo) -> web.Response:
        path = request.path.rstrip("/") or "/"
        parts = [p for p in path.split("/") if p]
        body: Obj | None = None
        if path in ("/healthz", "/livez", "/readyz"):
            return web.Response(text="ok")
        if path == "/version":
            body = discovery.version()
        elif path == "/api":
            body = discovery.core_versions(request.host)
        elif path == "/apis":
            body = discovery.group_list(self.registry)
        elif len(parts) == 2 and parts[0] == "api":
            body = discovery.resource_list(self.registry, "", parts[1])
        elif len(parts) == 2 and parts[0] == "apis":
            body = discovery.group(self.registry, parts[1])
        elif len(parts) == 3 and parts[0] == "apis":
            body = discovery.resource_list(self.registry, parts[1], parts[2])
        elif path == "/openapi/v3":
            body = openapi.index(self.registry)
        elif parts[:2] == ["openapi", "v3"]:
            document = openapi.document(self.registry, "/".join(parts[2:]))
            if document is not None:
                return web.Response(body=document, content_type="application/json")
        if body is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        return _json(body)

    # -------------------------------------------------------------------------------------------- reads

    def _must_get(self, resource: ResourceType, namespace: str | None, name: str) -> Obj:
        obj = self.store.get(resource.qualified, (namespace or "", name))
        if obj is None:
            raise errors.not_found(resource.plural, resource.group, name)
        return obj

    async def _get(
        self, request: web.Request, resource: ResourceType, namespace: str | None, name: str
    ) -> web.Response:
        return self._read_answer(request, resource, self._must_get(resource, namespace, name))

    async def _list(self, request: web.Request, resource: ResourceType, namespace: str | None) -> web.Response:
        body = list_objects(self.store, resource, namespace, request.query, self.stale_list_revision)
        return self._read_answer(request, resource, body)

    def _read_answer(self, request: web.Request, resource: ResourceType, body: Obj) -> web.Response:
        """The object or list, or the Table of it when the client asks for one (`kubectl get`,
        `lab.apiserver.tables`)."""
        version = tables.wants_table(request.headers.get("Accept", ""))
        if version is None:
            return _json(body)
        include = request.query.get("includeObject", "")
        return _json(tables.to_table(resource, body, self.clock.now(), version=version, include=include))

    async def _watch(self, request: web.Request, resource: ResourceType, namespace: str | None) -> web.StreamResponse:
        stream = WatchStream(self.store, self.clock, resource, namespace, request.query, self.bookmark_interval)
        return await stream.serve(request)

    # ------------------------------------------------------------------------------------------- writes

    @staticmethod
    async def _body(request: web.Request) -> Any:
        raw = await request.read()
        if not raw:
            return None
        content_type = request.headers.get("Content-Type", "application/json").split(";")[0].strip()
        if content_type == protobuf.PROTOBUF:
            return protobuf.decode(raw)  # the reviews kubectl sends so; other kinds 415
        try:
            if content_type.endswith("yaml"):
                return yaml.safe_load(raw)
            return json.loads(raw)
        except (ValueError, yaml.YAMLError) as error:
            raise errors.bad_request(f"the request body could not be decoded: {error}") from error

    def _dry_run(self, request: web.Request) -> bool:
        values = request.query.getall("dryRun", [])
        if any(v != "All" for v in values):
            raise errors.bad_request(f'dryRun: Unsupported value: "{values[0]}": supported values: "All"')
        return bool(values)

    def _check_namespace(self, resource: ResourceType, namespace: str | None) -> None:
        """NamespaceLifecycle admission: no object in a missing or terminating namespace."""
        if not resource.namespaced or namespace is None:
            return
        ns_resource = self.registry.by_path("", "v1", "namespaces")
        assert ns_resource is not None
        ns = self.store.get(ns_resource.qualified, ("", namespace))
        if ns is None:
            raise errors.not_found("namespaces", "", namespace)
        if ns["metadata"].get("deletionTimestamp"):
            raise ApiError(
                403,
                "Forbidden",
                f'{resource.plural} "{""}" is forbidden: unable to create new content in namespace {namespace} '
                "because it is being terminated",
                {"kind": resource.plural},
            )

    def _validate(self, resource: ResourceType, obj: Obj, old: Obj | None) -> None:
        causes = resource.schema.validate(obj, old)
        if causes:
            name = (obj.get("metadata") or {}).get("name") or ""
            raise errors.invalid(
                resource.kind,
                resource.group,
                name,
                [{"reason": c.reason, "field": c.field, "message": c.message} for c in causes],
            )

    async def _admit(
        self,
        operation: Operation,
        resource: ResourceType,
        subresource: str | None,
        obj: Obj | None,
        old: Obj | None,
        user: UserInfo,
        dry_run: bool,
        options: Obj | None = None,
    ) -> Obj | None:
        """Mutating admission, defaulting, schema validation, validating admission; returns the object to store."""
        meta = (obj or old or {}).get("metadata") or {}
        kind = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}[operation]
        request = AdmissionRequest(
            operation,
            resource,
            subresource,
            meta.get("namespace"),
            meta.get("name", ""),
            obj,
            old,
            user,
            dry_run,
            options if options is not None else {"kind": kind, "apiVersion": "meta.k8s.io/v1"},
        )
        await self.admission.mutate(request)
        if request.obj is not None:
            resource.schema.default(request.obj)
            resource.schema.prune(request.obj)
            self._validate(resource, request.obj, old)
        await self.admission.validate(request)
        return request.obj

    async def _create(
        self,
        request: web.Request,
        resource: ResourceType,
        namespace: str | None,
        info: RequestInfo,
        user: UserInfo,
    ) -> web.Response:
        if info.subresource == "binding":
            return await self._bind(request, resource, namespace, require_name(info))
        if resource.review_only:
            body = await self._body(request)
            if isinstance(body, dict):
                self._check_body_kind(resource, body)
            return _json(reviews.answer(resource, body, user, self.authorizer, self.clock), 201)
        if info.name:
            raise errors.method_not_supported(info.resource, info.group, "create")
        body = await self._body(request)
        if not isinstance(body, dict):
            raise errors.bad_request("the body of a create must be an object")
        self._check_body_kind(resource, body)
        dry_run = self._dry_run(request)
        warnings = field_validation.check(
            resource, body, field_validation.directive(request.query.get("fieldValidation"))
        )
        obj = strategy.prepare_create(resource, body, namespace, self.clock)
        resource.schema.default(obj)
        resource.schema.prune(obj)
        if not obj["metadata"].get("name"):
            raise errors.invalid(
                resource.kind,
                resource.group,
                "",
                [
                    {
                        "reason": "FieldValueRequired",
                        "field": "metadata.name",
                        "message": "Required value: name or generateName is required",
                    }
                ],
            )
        stored = await self._store_new(resource, namespace, obj, user, dry_run, manager=_manager(request))
        return _json(stored, 201, CIMultiDict(field_validation.warning_headers(warnings)))

    async def _store_new(
        self,
        resource: ResourceType,
        namespace: str | None,
        obj: Obj,
        user: UserInfo,
        dry_run: bool,
        *,
        manager: str | None = None,
    ) -> Obj:
        """Admit and store a new object; a create that is not an apply records `manager`'s ownership of every
        field it set (`managed_fields`)."""
        if manager is not None:
            managed_fields.track_write(None, obj, manager, resource.schema.list_semantics, None, self.clock.timestamp())
        self._check_namespace(resource, namespace)
        key = (namespace or "", obj["metadata"]["name"])
        if self.store.get(resource.qualified, key) is not None:
            raise errors.already_exists(resource.plural, resource.group, key[1])
        admitted = await self._admit("CREATE", resource, None, obj, None, user, dry_run)
        assert admitted is not None
        # Admission may have awaited: the name can have been taken meanwhile, as etcd's create-if-absent would see.
        if self.store.get(resource.qualified, key) is not None:
            raise errors.already_exists(resource.plural, resource.group, key[1])
        self._check_namespace(resource, namespace)
        if dry_run:
            return admitted
        return self.store.put(resource.qualified, key, admitted)

    @staticmethod
    def _check_body_kind(resource: ResourceType, body: Obj) -> None:
        api_version, kind = body.get("apiVersion"), body.get("kind")
        if api_version and api_version != resource.api_version:
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected API version "
                f"({resource.api_version})"
            )
        if kind and kind != resource.kind:
            raise errors.bad_request(
                f"the kind in the data ({kind}) does not match the expected kind ({resource.kind})"
            )

    async def _update(
        self,
        request: web.Request,
        resource: ResourceType,
        namespace: str | None,
        info: RequestInfo,
        user: UserInfo,
    ) -> web.Response:
        name = require_name(info)
        body = await self._body(request)
        if not isinstance(body, dict):
            raise errors.bad_request("the body of an update must be an object")
        self._check_body_kind(resource, body)
        dry_run = self._dry_run(request)
        warnings = field_validation.check(
            resource, body, field_validation.directive(request.query.get("fieldValidation"))
        )
        requested_rv = (body.get("metadata") or {}).get("resourceVersion")
        if not requested_rv and not resource.allows_unconditional_update:
            raise errors.invalid(
                resource.kind,
                resource.group,
                name,
                [
                    {
                        "reason": "FieldValueInvalid",
                        "field": "metadata.resourceVersion",
                        "message": "Invalid value: 0x0: must be specified for an update",
                    }
                ],
            )

        def change(current: Obj) -> Obj:
            return copy.deepcopy(body)

        manager = _manager(request)
        stored = await self._write_existing(
            resource, namespace, name, info.subresource, change, user, dry_run, manager=manager
        )
        return _json(stored, headers=CIMultiDict(field_validation.warning_headers(warnings)))

    async def _patch(
        self,
        request: web.Request,
        resource: ResourceType,
        namespace: str | None,
        info: RequestInfo,
        user: UserInfo,
    ) -> web.Response:
        name = require_name(info)
        content_type = request.headers.get("Content-Type", "").split(";")[0].strip().lower()
        supported = (
            (*_CUSTOM_RESOURCE_PATCHES, STRATEGIC_MERGE_PATCH) if resource.is_builtin else _CUSTOM_RESOURCE_PATCHES
        )
        if content_type not in supported:
            raise errors.ApiError(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format - accepted media types include: "
                f"{', '.join(supported)}",
                {},
            )
        patch = await self._body(request)
        dry_run = self._dry_run(request)
        if content_type == APPLY_PATCH:
            return await self._apply(request, resource, namespace, info, user, patch, dry_run)
        if patch is None:
            raise errors.bad_request("the body of a patch must not be empty")

        def change(current: Obj) -> Obj:
            try:
                if content_type == JSON_PATCH:
                    patched = patching.json_patch(current, patch)
                elif content_type == MERGE_PATCH:
                    patched = patching.merge_patch(current, patch)
                else:
                    patched = patching.strategic_merge_patch(current, patch, resource.schema.strategic_list_semantics)
            except patching.PatchError as error:
                raise _patch_error(error) from error
            if not isinstance(patched, dict):
                raise errors.bad_request("the patched object is not an object")
            return patched

        manager = _manager(request)
        stored = await self._write_existing(
            resource, namespace, name, info.subresource, change, user, dry_run, manager=manager
        )
        return _json(stored)

    async def _apply(
        self,
        request: web.Request,
        resource: ResourceType,
        namespace: str | None,
        info: RequestInfo,
        user: UserInfo,
        applied: Any,
        dry_run: bool,
    ) -> web.Response:
        name = require_name(info)
        manager = request.query.get("fieldManager", "")
        if not manager:
            raise errors.bad_request("PATCH, application/apply-patch+yaml: fieldManager is required for apply patch")
        if not isinstance(applied, dict):
            raise errors.bad_request("an apply patch must be an object")
        force = request.query.get("force", "").lower() == "true"
        self._check_body_kind(resource, applied)

        # An applied configuration that names a resourceVersion is conditional on it, on the main resource and
        # on /status alike (the patch handler keeps it as the update's precondition: `patch.go` applyPatcher).
        precondition = (applied.get("metadata") or {}).get("resourceVersion")

        def merge(current: Obj | None) -> Obj:
            try:
                merged = patching.server_side_apply(
                    current,
                    applied,
                    manager,
                    resource.schema.list_semantics,
                    force,
                    info.subresource,
                    self.clock.timestamp(),
                )
            except patching.PatchError as error:
                raise _patch_error(error) from error
            if precondition:
                merged.setdefault("metadata", {})["resourceVersion"] = precondition
            return merged

        if self.store.get(resource.qualified, (namespace or "", name)) is None:
            if info.subresource or precondition:
                raise errors.not_found(resource.plural, resource.group, name)
            created = strategy.prepare_create(resource, merge(None), namespace, self.clock)
            created["metadata"]["name"] = name
            resource.schema.default(created)
            resource.schema.prune(created)
            return _json(await self._store_new(resource, namespace, created, user, dry_run), 201)
        stored = await self._write_existing(resource, namespace, name, info.subresource, merge, user, dry_run)
        return _json(stored)

    async def _write_existing(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        subresource: str | None,
        change: Callable[[Obj], Obj],
        user: UserInfo,
        dry_run: bool,
        *,
        manager: str | None = None,
    ) -> Obj:
        """Read, change, admit and store, retrying when the object moved underneath (GuaranteedUpdate). A write
        that is not an apply records `manager`'s ownership of what it changed (`managed_fields`)."""
        key = (namespace or "", name)
        for _ in range(_MAX_WRITE_ATTEMPTS):
            current = self._must_get(resource, namespace, name)
            changed = change(copy.deepcopy(current))
            conditional = (changed.get("metadata") or {}).get("resourceVersion")
            if conditional and conditional != current["metadata"]["resourceVersion"]:
                raise errors.conflict(resource.plural, resource.group, name, errors.MODIFIED)
            new = strategy.prepare_update(resource, changed, current, subresource)
            new["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            if new == current:
                return current  # a no-op write does not move the resourceVersion, as the apiserver skips it
            if manager is not None:
                managed_fields.track_write(
                    current, new, manager, resource.schema.list_semantics, subresource, self.clock.timestamp()
                )
            admitted = await self._admit("UPDATE", resource, subresource, new, current, user, dry_run)
            assert admitted is not None
            latest = self.store.get(resource.qualified, key)
            if latest is None:
                raise errors.not_found(resource.plural, resource.group, name)
            if latest["metadata"]["resourceVersion"] != current["metadata"]["resourceVersion"]:
                if conditional:
                    raise errors.conflict(resource.plural, resource.group, name, errors.MODIFIED)
                continue
            if dry_run:
                return admitted
            if strategy.should_remove_after_update(admitted):
                self.store.put(resource.qualified, key, admitted)
                return self.store.remove(resource.qualified, key)
            return self.store.put(resource.qualified, key, admitted)
        raise errors.conflict(resource.plural, resource.group, name, errors.MODIFIED)

    # ----------------------------------------------------------------------------------------- deletion

    async def _delete(
        self, request: web.Request, resource: ResourceType, namespace: str | None, name: str, user: UserInfo
    ) -> web.Response:
        body = await self._body(request)
        options = DeleteOptions.parse(body if isinstance(body, dict) else None, dict(request.query))
        obj, removed = await self._delete_one(resource, namespace, name, options, user)
        # 200 with the object, removed or not; 202 only for an object kept after an explicit
        # `orphanDependents: false` (`apiserver/pkg/endpoints/handlers/delete.go`, kept for old clients).
        accepted = not removed and options.orphan_dependents is False
        return _json(obj, 202 if accepted else 200)

    async def _delete_one(
        self, resource: ResourceType, namespace: str | None, name: str, options: DeleteOptions, user: UserInfo
    ) -> tuple[Obj, bool]:
        key = (namespace or "", name)
        current = self._must_get(resource, namespace, name)
        check_preconditions(resource, current, options)
        await self._admit("DELETE", resource, None, None, current, user, options.dry_run, options.as_object())
        latest = self._must_get(resource, namespace, name)
        outcome = decide(resource, latest, options, self.clock)
        if options.dry_run or outcome.action == "pending":
            return outcome.obj, outcome.action in ("remove", "mark-then-remove")
        if outcome.action == "mark-then-remove":
            self.store.put(resource.qualified, key, outcome.obj)
            return self.store.remove(resource.qualified, key), True
        if outcome.action == "remove":
            return self.store.remove(resource.qualified, key), True
        return self.store.put(resource.qualified, key, outcome.obj), False

    async def _delete_collection(
        self, request: web.Request, resource: ResourceType, namespace: str | None, user: UserInfo
    ) -> web.Response:
        body = await self._body(request)
        options = DeleteOptions.parse(body if isinstance(body, dict) else None, dict(request.query))
        selection = Filter.parse(request.query, resource)
        names = [key[1] for key, obj in self.store.scan(resource.qualified, namespace) if selection.matches(obj)]
        items = []
        for name in names:
            try:
                obj, _ = await self._delete_one(resource, namespace, name, options, user)
            except ApiError as error:
                if error.code == 404:
                    continue
                raise
            items.append(obj)
        return _json(
            {
                "kind": f"{resource.kind}List",
                "apiVersion": resource.api_version,
                "metadata": {"resourceVersion": str(self.store.revision)},
                "items": items,
            }
        )

    # ------------------------------------------------------------------------------------- subresources

    async def _bind(
        self, request: web.Request, resource: ResourceType, namespace: str | None, name: str
    ) -> web.Response:
        """`pods/binding`: what the scheduler posts (`pkg/registry/core/pod/storage/storage.go` `assignPod`)."""
        body = await self._body(request)
        target = ((body or {}).get("target") or {}).get("name") if isinstance(body, dict) else None
        if not target:
            raise errors.invalid(
                "Binding",
                "",
                name,
                [{"reason": "FieldValueRequired", "field": "target.name", "message": "Required value"}],
            )
        key = (namespace or "", name)
        pod = self._must_get(resource, namespace, name)
        if pod["metadata"].get("deletionTimestamp"):
            raise errors.conflict(
                resource.plural,
                resource.group,
                name,
                f"pod {name} is being deleted, cannot be assigned to a host",
            )
        current_node = (pod.get("spec") or {}).get("nodeName")
        if current_node:
            raise errors.conflict(
                resource.plural,
                resource.group,
                name,
                f'pod {name} is already assigned to node "{current_node}"',
            )
        pod.setdefault("spec", {})["nodeName"] = target
        conditions = [
            c for c in (pod.setdefault("status", {}).get("conditions") or []) if c.get("type") != "PodScheduled"
        ]
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": self.clock.timestamp(),
            }
        )
        pod["status"]["conditions"] = conditions
        self.store.put(resource.qualified, key, pod)
        return _json(_status_success(code=201), 201)


def _patch_error(error: patching.PatchError) -> ApiError:
    details: Obj = {}
    if error.causes:
        details["causes"] = error.causes
    return ApiError(error.code, error.reason, error.message, details)
