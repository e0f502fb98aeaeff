"""Support for the Airflow tests: the lab they run against, a request probe, per-test hooks, DAG runs.

* `Probe` is an aiohttp middleware that records every request of a non-admin identity (the provider's, never
  the test's own cluster building) with its user, User-Agent, answer status, and for a WATCH its opening. A
  test thread waits on it (`wait_for`) instead of sleeping: "the trigger opened its watch", "the trigger's first
  check is answered". The provider's clients identify themselves (`hooks.dispatch.WORKER_USER_AGENT`,
  `TRIGGERER_USER_AGENT`), so the worker's fast path and the trigger's checks are told apart.
* `Hooks` (dispatch_lab/middleware.py) holds per-test middlewares and seeded fault injectors for those same
  requests.
* `Actor` runs a test's part of the story (the pods going, a node being tainted) in a background thread while
  `dag.test()` runs in the test's thread, and re-raises its failure in the test.
* `DagRunResult` reads back what a `dag.test()` run left in the metadata database: task states and tries,
  XComs, rendered fields. (`dag.test()` writes the task logs to stdout, not to files: tests read them with
  `capfd`.)
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from dispatch_lab.middleware import Handler, Hooks, failure_status, user_name

from airflow_provider_dispatch.hooks.dispatch import TRIGGERER_USER_AGENT, WORKER_USER_AGENT
from airflow_provider_dispatch_lab.apiserver.faults import FaultRule
from airflow_provider_dispatch_lab.runtime import Lab

ADMIN_USER = "lab-admin"
WAIT_BOUND = 60.0
"""Seconds a test waits for something the lab must see before the test fails (a bound, not a synchronisation)."""


@dataclass(frozen=True)
class Seen:
    """One request: `phase` is "open" when a watch started, "done" when any request was answered. `arrival`
    numbers the requests in the order they reached the lab, so that a request sent before a mark and answered after
    it (a watch an earlier test's trigger left, closing late) is not counted as sent since the mark."""

    user: str
    agent: str
    method: str
    path: str
    query: Mapping[str, str]
    status: int | str
    phase: str
    arrival: int = -1

    @property
    def watch(self) -> bool:
        return self.query.get("watch", "").lower() in ("true", "1")

    @property
    def writes(self) -> bool:
        return self.method in ("PUT", "POST", "PATCH", "DELETE")

    @property
    def by_trigger(self) -> bool:
        return self.agent == TRIGGERER_USER_AGENT

    @property
    def by_worker(self) -> bool:
        return self.agent == WORKER_USER_AGENT

    def is_watch_of(self, resource: str, namespace: str | None = None) -> bool:
        where = f"/namespaces/{namespace}/" if namespace else "/"
        return self.watch and self.phase == "open" and self.path.endswith(f"/{resource}") and where in self.path + "/"


@dataclass
class Probe:
    seen: list[Seen] = field(default_factory=list)
    _changed: threading.Condition = field(default_factory=threading.Condition)
    _arrivals: int = 0
    #: for each mark given out, how many entries `seen` held then: an entry of a request that arrived after the
    #: mark was added after it, so the search for them starts there
    _offsets: dict[int, int] = field(default_factory=dict)

    def _add(self, entry: Seen) -> None:
        with self._changed:
            self.seen.append(entry)
            self._changed.notify_all()

    def _arrived(self) -> int:
        with self._changed:
            self._arrivals += 1
            return self._arrivals - 1

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        user = user_name(request)
        if user == ADMIN_USER:
            return await handler(request)

        arrival = self._arrived()

        def entry(status: int | str, phase: str = "done") -> Seen:
            agent = request.headers.get("User-Agent", "")
            return Seen(user, agent, request.method, request.path, dict(request.query), status, phase, arrival)

        if request.query.get("watch", "").lower() in ("true", "1"):
            self._add(entry("-", "open"))
        try:
            response = await handler(request)
        except BaseException as error:
            self._add(entry(failure_status(error)))
            raise
        self._add(entry(response.status))
        return response

    def mark(self) -> int:
        """The number of requests that have arrived so far: what `since` and `wait_for` count from."""
        with self._changed:
            self._offsets.setdefault(self._arrivals, len(self.seen))
            return self._arrivals

    def _sent_since(self, mark: int) -> list[Seen]:
        return [s for s in self.seen[self._offsets.get(mark, 0) :] if s.arrival >= mark]

    def since(self, mark: int) -> list[Seen]:
        """What the lab saw of the requests that arrived after `mark`, in the order it saw it."""
        with self._changed:
            return self._sent_since(mark)

    def wait_for(self, predicate: Callable[[list[Seen]], bool], mark: int = 0, bound: float = WAIT_BOUND) -> None:
        """Block until `predicate(requests since mark)` holds; fail after `bound` seconds."""
        with self._changed:
            if not self._changed.wait_for(lambda: predicate(self._sent_since(mark)), timeout=bound):
                raise AssertionError(f"the lab never saw what the test waited for; it saw {self._sent_since(mark)}")


def node_reads(seen: list[Seen], node: str, *, by_trigger: bool) -> int:
    """How many reads of Node `node` were answered, by a trigger (else by a worker): each check of the drain or
    outcome trigger reads the nodes of the pods it looks at, so this counts its checks."""
    return sum(
        1
        for s in seen
        if s.phase == "done" and s.path.endswith(f"/nodes/{node}") and (s.by_trigger if by_trigger else s.by_worker)
    )


def trainjob_reads(seen: list[Seen], name: str, *, by_trigger: bool) -> int:
    """How many reads of TrainJob `name` were answered, by a trigger (else by a worker): each check of a drain
    sensor or trigger reads the TrainJob once, so this counts its checks (a poke sensor's pokes), whatever the check
    found (its node reads depend on it: the check that finds the pods gone still reads the recorded node)."""
    return sum(
        1
        for s in seen
        if s.phase == "done"
        and s.method == "GET"
        and s.path.endswith(f"/trainjobs/{name}")
        and (s.by_trigger if by_trigger else s.by_worker)
    )


class Actor:
    """A background thread for the cluster's side of a story; `join()` re-raises its failure."""

    def __init__(self, story: Callable[[], None]) -> None:
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(story,), name="test-actor", daemon=True)

    def _run(self, story: Callable[[], None]) -> None:
        try:
            story()
        except BaseException as error:
            self._error = error

    def start(self) -> Actor:
        self._thread.start()
        return self

    def join(self) -> None:
        self._thread.join(WAIT_BOUND * 2)
        assert not self._thread.is_alive(), "the test's actor did not finish"
        if self._error is not None:
            raise self._error


@dataclass
class AirflowLab:
    """The lab for the Airflow tests (conftest's `airflow_lab`), its probe and hooks, kubeconfigs per identity."""

    lab: Lab
    probe: Probe
    hooks: Hooks
    kubeconfigs: dict[str, Path]

    def connection(self, identity: str) -> dict[str, Any]:
        """A `kubernetes` connection (as its extras) for one of the lab's identities."""
        return {"kube_config_path": str(self.kubeconfigs[identity])}


@dataclass
class AirflowEnvironment:
    """The isolated Airflow home of the session and how long its DB migration took (conftest's `airflow_env`)."""

    home: Path
    migrate_seconds: float


@dataclass
class DagRunResult:
    """What one `dag.test()` run left in the metadata database."""

    dag_id: str
    run_id: str
    state: str

    def _ti(self, task_id: str) -> Any:
        from airflow.models.taskinstance import TaskInstance
        from airflow.utils.session import create_session
        from sqlalchemy import select

        with create_session() as session:
            ti = session.scalars(
                select(TaskInstance).where(
                    TaskInstance.dag_id == self.dag_id,
                    TaskInstance.run_id == self.run_id,
                    TaskInstance.task_id == task_id,
                )
            ).one()
            session.expunge(ti)
            return ti

    def task_state(self, task_id: str) -> str:
        return str(self._ti(task_id).state)

    def try_number(self, task_id: str) -> int:
        return int(self._ti(task_id).try_number)

    def xcom(self, task_id: str, key: str = "return_value") -> Any:
        return read_xcom(self.dag_id, self.run_id, task_id, key)

    def rendered(self, task_id: str) -> dict[str, Any]:
        return read_rendered(self.dag_id, self.run_id, task_id)


#: conftest's `run_dag` fixture: `run_dag(dag_id, **conf)` runs one `dag.test()` with that conf
RunDag = Callable[..., DagRunResult]


def read_xcom(dag_id: str, run_id: str, task_id: str, key: str = "return_value") -> Any:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = session.execute(XComModel.get_many(run_id=run_id, key=key, task_ids=task_id, dag_ids=dag_id)).scalars()
        values = [XComModel.deserialize_value(row) for row in rows]
    assert len(values) <= 1, values
    return values[0] if values else None


def read_rendered(dag_id: str, run_id: str, task_id: str) -> dict[str, Any]:
    from airflow.models.renderedtifields import RenderedTaskInstanceFields as RTIF
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        row = session.scalars(
            select(RTIF).where(RTIF.dag_id == dag_id, RTIF.run_id == run_id, RTIF.task_id == task_id)
        ).first()
        return dict(row.rendered_fields) if row is not None else {}


__all__ = [
    "ADMIN_USER",
    "WAIT_BOUND",
    "Actor",
    "AirflowEnvironment",
    "AirflowLab",
    "DagRunResult",
    "FaultRule",
    "Hooks",
    "Probe",
    "RunDag",
    "Seen",
    "find_wait_reasons",
    "read_rendered",
    "read_xcom",
]


def find_wait_reasons(dag_id: str, task_id: str, containing: str) -> dict[str, str]:
    """While a run is still going (its run id unknown to the test): the task's rendered `wait_reason` and its
    XCom `wait_reason`, from the rows that mention `containing` (the test's namespace)."""
    from airflow.models.renderedtifields import RenderedTaskInstanceFields as RTIF
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    found: dict[str, str] = {}
    with create_session() as session:
        for row in session.scalars(select(RTIF).where(RTIF.dag_id == dag_id, RTIF.task_id == task_id)):
            reason = dict(row.rendered_fields).get("wait_reason", "")
            if containing in str(reason):
                found["rendered"] = str(reason)
        query = select(XComModel).where(
            XComModel.dag_id == dag_id, XComModel.task_id == task_id, XComModel.key == "wait_reason"
        )
        for xcom in session.scalars(query):
            value = XComModel.deserialize_value(xcom)
            if containing in str(value):
                found["xcom"] = str(value)
    return found
