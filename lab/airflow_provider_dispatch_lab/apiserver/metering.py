"""Requests and bytes counted at the lab's API server, for benchmarks: a middleware and the `/lab/metrics` path.

Why at the server, not in the client: the benchmarks compare clients (the `kubernetes` client with and without
its models, `kubernetes_asyncio`, later Airflow's triggerer), and each would need its own hook (urllib3, aiohttp)
to count what it sends and receives. The server sees every client's requests the same way, and it runs in
another process than the client being measured, so counting costs the client nothing.

What is counted, per (user, verb, resource) as `lab.apiserver.requests.parse_request` names them (the same attributes
the authorizer sees):

* `requests`: requests that passed authentication and authorization (a 401 or 403 answered by the server's auth
  middleware, outside this one, is not counted);
* `requestBytes`: the request as received: request line, headers and body (`Content-Length`);
* `responseBytes`: the response as written to the socket: status line, headers and body, chunk framing included
  (aiohttp's payload writer `output_size`). TCP/IP overhead is not counted, and the lab never compresses.

To know a response's size on the wire the middleware sends the response itself (`prepare` then `write_eof`);
aiohttp's request handler then finds it sent and leaves it alone (`web_protocol.RequestHandler.finish_response`).
An `ApiError` raised further in is answered here with the Status body the server's error middleware would send,
so refusals are counted with their bytes too. A streamed answer (a watch) is counted when it ends.

The real API server counts the same things as Prometheus metrics at `/metrics`: `apiserver_request_total` by
verb, resource and code, and `apiserver_response_sizes` by verb and resource (`k8s.io/apiserver/pkg/endpoints/
metrics/metrics.go`). The lab's figures are exact counts in JSON instead, at a lab-only non-resource path outside
`/api` and `/apis`, so no client mistakes it for a resource:

    GET /lab/metrics  ->  {"kind": "LabMetrics", "series": [{"user", "verb", "resource", "requests",
                           "requestBytes", "responseBytes"}, ...], "totals": {...}}

Reading `/lab/metrics` is not counted. Counters only grow; a benchmark reads them before and after what it
measures and subtracts. The middleware must come first among the lab's extra middlewares
(`AsyncLab(middlewares=(meter.middleware, ...))`) so that it sees what the others (fault injection) answer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

from aiohttp import web

from airflow_provider_dispatch_lab.apiserver.errors import ApiError, method_not_supported
from airflow_provider_dispatch_lab.apiserver.requests import parse_request
from airflow_provider_dispatch_lab.apiserver.server import USER_KEY, error_response

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
SeriesKey = tuple[str, str, str]

METRICS_PATH: Final = "/lab/metrics"
METRICS_KIND: Final = "LabMetrics"


@dataclass
class Counts:
    """What one series has counted so far."""

    requests: int = 0
    request_bytes: int = 0
    response_bytes: int = 0

    def as_json(self) -> dict[str, int]:
        return {"requests": self.requests, "requestBytes": self.request_bytes, "responseBytes": self.response_bytes}


def request_size(request: web.BaseRequest) -> int:
    """Bytes of the request as received: `METHOD /path?query HTTP/1.1\\r\\n`, each header line, the blank line and
    the body as its `Content-Length` gives it."""
    line = len(request.method) + 1 + len(request.raw_path.encode()) + len(" HTTP/1.1\r\n")
    headers = sum(len(name) + 2 + len(value) + 2 for name, value in request.raw_headers)
    return line + headers + 2 + (request.content_length or 0)


def series_key(request: web.Request) -> SeriesKey:
    """(user, verb, resource): the resource as `pods`, `trainjobs.trainer.kubeflow.org/status`, or for a
    non-resource request its path (`/version`, `/apis`)."""
    user = request.get(USER_KEY)
    name = user.name if user is not None else ""
    watch = request.query.get("watch", "").lower() in ("true", "1")
    try:
        info = parse_request(request.method, request.path, watch, request.query.get("fieldSelector", ""))
    except ApiError:  # a path the server answers 404: count it under its path
        return name, request.method.lower(), request.path
    if not info.is_resource:
        return name, info.verb, info.path
    resource = info.qualified_resource + (f"/{info.subresource}" if info.subresource else "")
    return name, info.verb, resource


class Meter:
    """Counts every request and its bytes; serves the counts at `GET /lab/metrics`."""

    def __init__(self) -> None:
        self._series: dict[SeriesKey, Counts] = {}

    def snapshot(self) -> dict[str, Any]:
        """The `/lab/metrics` body: every series, and their totals."""
        totals = Counts()
        series: list[dict[str, Any]] = []
        for (user, verb, resource), counts in sorted(self._series.items()):
            series.append({"user": user, "verb": verb, "resource": resource, **counts.as_json()})
            totals.requests += counts.requests
            totals.request_bytes += counts.request_bytes
            totals.response_bytes += counts.response_bytes
        return {"kind": METRICS_KIND, "apiVersion": "v1", "series": series, "totals": totals.as_json()}

    def _count(self, key: SeriesKey, request_bytes: int, response_bytes: int) -> None:
        counts = self._series.setdefault(key, Counts())
        counts.requests += 1
        counts.request_bytes += request_bytes
        counts.response_bytes += response_bytes

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path.rstrip("/") == METRICS_PATH:
            if request.method != "GET":
                raise method_not_supported("lab/metrics", "", request.method.lower())
            return web.json_response(self.snapshot())
        key = series_key(request)
        size = request_size(request)
        try:
            response = await handler(request)
        except ApiError as error:
            response = error_response(error)
        except BaseException:
            self._count(key, size, 0)  # the connection was dropped or the handler failed: no answer to count
            raise
        try:
            await response.prepare(request)
            await response.write_eof()
        finally:
            self._count(key, size, response.body_length)
        return response


__all__ = ["METRICS_KIND", "METRICS_PATH", "Counts", "Meter", "request_size", "series_key"]
