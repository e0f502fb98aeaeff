"""A concurrent writer for the conflict tests: Trainer writing a TrainJob's status while dispatch works on it.

Trainer writes `status.jobsStatus` whenever the JobSet's counts move; a write between dispatch's read of the
TrainJob and its conditional write moves the resourceVersion, and the API server refuses dispatch's write with a
real 409 (no injected answer: the store decides). `StatusWriter.hook` is a lab middleware (the `Hooks` of
tests/dispatch_lab and tests/airflow): before each of the first `times` matching requests of the provider reaches
the server, it writes the TrainJob's status as the lab's controllers' identity (never hooked itself), then lets
the request through.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import web

from airflow_provider_dispatch_lab.client import LabClient
from airflow_provider_dispatch_lab.kinds import TRAINJOB
from airflow_provider_dispatch_lab.runtime import Lab
from airflow_provider_dispatch_lab.simulated.cluster import ClusterContext

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class StatusWriter:
    """Writes TrainJob `namespace/name`'s status before each of the first `times` hooked requests (None: all)."""

    context: ClusterContext
    namespace: str
    name: str
    times: int | None = None
    wrote: list[str] = field(default_factory=list)
    """The resourceVersion each status write left, in order."""
    _client: LabClient | None = None

    async def hook(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if self.times is None or len(self.wrote) < self.times:
            if self._client is None:
                self._client = self.context.client("test-trainer-status")
            active = len(self.wrote) + 1
            written = await self._client.patch(
                TRAINJOB,
                self.namespace,
                self.name,
                {"status": {"jobsStatus": [_job_status(active)]}},
                subresource="status",
            )
            self.wrote.append(str(written["metadata"]["resourceVersion"]))
        return await handler(request)

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()


@dataclass
class StatusWriters:
    """`writers(times)`: a `StatusWriter` for TrainJob ft-7 of `namespace`, hooked on dispatch's TrainJob PUTs
    through `add` (a lab `Hooks.add`); `close()`, or leaving a `with` block, closes them all on the lab's loop,
    where their clients live."""

    lab: Lab
    add: Callable[..., None]
    namespace: str
    made: list[StatusWriter] = field(default_factory=list)

    def __call__(self, times: int | None) -> StatusWriter:
        writer = StatusWriter(self.lab.inner.context(), self.namespace, "ft-7", times)
        self.add(writer.hook, when=is_trainjob_put)
        self.made.append(writer)
        return writer

    def close(self) -> None:
        for writer in self.made:
            self.lab.run(writer.close)

    def __enter__(self) -> StatusWriters:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _job_status(active: int) -> dict[str, object]:
    """One `jobsStatus` entry as Trainer writes it (every field is required by the CRD)."""
    return {"name": "node", "ready": 0, "succeeded": 0, "failed": 0, "active": active, "suspended": 0}


def is_trainjob_put(request: web.Request) -> bool:
    """The `when` of a hook: a PUT of a TrainJob (dispatch's conditional write)."""
    return request.method == "PUT" and "/trainjobs/" in request.path
