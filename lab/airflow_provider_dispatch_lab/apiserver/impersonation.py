"""Impersonation (`kubectl --as`, `Impersonate-*` headers): refused by the lab, in words, rather than ignored.

kube-apiserver's `WithImpersonation` filter (k8s.io/apiserver v0.36.3 `pkg/endpoints/filters/impersonation.go`)
checks that the requester may `impersonate` the named user, groups, uid and extras, then serves the request as
that user. The lab does not implement it: it authorizes every request as its sender. Ignoring the headers would
answer `kubectl auth can-i --as system:serviceaccount:ns:sa ...` with the admin's permissions, a wrong "yes"; so a
request that carries any of them is answered 400 with what to do instead: use that identity's kubeconfig
(`dispatch lab serve --rbac` writes one for each of the lab's identities), or the real control plane
(`dispatch lab real`), whose API server impersonates.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from airflow_provider_dispatch_lab.apiserver import errors

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
PREFIX = "impersonate-"


@web.middleware
async def refuse_impersonation(request: web.Request, handler: Handler) -> web.StreamResponse:
    named = sorted({name for name in request.headers if name.lower().startswith(PREFIX)})
    if named:
        raise errors.bad_request(
            f"the lab does not implement impersonation ({', '.join(named)}): ask as that identity with its own "
            "kubeconfig, or use the real control plane (dispatch lab real)"
        )
    return await handler(request)


__all__ = ["refuse_impersonation"]
