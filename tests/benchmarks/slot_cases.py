"""Worker slot-seconds of the real `PodsDrainedSensor` during a one-hour wait, in poke, reschedule and deferrable mode.

`python -m benchmarks.slot_cases` with a payload naming the modes. The driver (`slot_seconds.py`) has set, for
this process only, an Airflow home of its own: a fresh sqlite metadata DB, a DAG bundle folder, and the
`kubernetes_default` connection pointing at the lab. The modes share the process and its DB (one migration, one
warm-up run), which is sound here because every figure is read from Airflow's records of each run, never from
this process's CPU or memory. The worker:

1. writes the benchmark's DAG file into the bundle folder (`dag_file`: one DAG per mode, the sensor's intervals
   scaled to the lab clock) and migrates the DB (`airflow.utils.db.initdb`);
2. builds the wait in the lab as the real controllers leave it: a held TrainJob whose one pod is Terminating on
   a Ready node (`dispatch_lab.cluster.Cluster.held_after_execution`);
3. runs the DAG with `dag.test()` in this thread (`repeat` times, each against a fresh wait, after one
   warm-up run); an actor thread waits for the sensor's first check (`ObservedDrainedSensor`, below), reads
   the lab clock, waits on the lab's own clock until the wait (one lab hour) plus a phase has passed since that
   check (`harness.lab_clock.RemoteClock.wait_until`), then removes the pod as its kubelet does once the
   containers stopped (DELETE with grace 0). The phase is drawn uniformly in one poke interval (seeded, the same
   draws in every mode): an hour is a whole number of poke intervals, and a removal always just after a poke
   would give poke and reschedule mode their worst detection latency;
4. reads back what Airflow recorded: the audit log (`Log`, one row per task-instance state change the
   Execution API made: `running` at every start, then `up_for_reschedule`, `deferred` or `success`), the
   `TaskReschedule` rows and the task instance. A worker slot is held from each `running` row to the next
   row that leaves running: those intervals are the slot-seconds, from Airflow's own records.

`dag.test()` runs a deferred task's trigger inline in this same process (`_run_task`, `run_triggerer=True`):
the process is busy all along, but Airflow records the task instance as `deferred` for that time, which is what
a real deployment bills to the triggerer, not to a worker slot. The slot-seconds here are read from those
records, so they are the deployment's, not this process's.
"""

from __future__ import annotations

import importlib
import importlib.util
import random
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import kubernetes

from airflow_provider_dispatch.sensors.pods_drained import PodsDrainedSensor

from .harness.held import TRAINJOB, held_trainjob
from .harness.lab_clock import RemoteClock
from .harness.workers import serve
from .slot_seconds import MODES

TASK_ID: Final = "drained"
#: audit-log events that end a worker's hold of the task (the task left `running`)
LEAVES_RUNNING: Final = frozenset(
    {"up_for_reschedule", "deferred", "success", "failed", "up_for_retry", "skipped", "removed", "upstream_failed"}
)
#: the longest the actor waits for the sensor's first check (a bound, not a synchronisation)
FIRST_CHECK_BOUND: Final = 300.0

#: set by the sensor's first evaluation; read through `this_module()` (see there)
FIRST_CHECK = threading.Event()


class ObservedDrainedSensor(PodsDrainedSensor):
    """The real sensor, which also tells the benchmark when its first check was evaluated (poke, reschedule, or
    the deferrable fast path): the instant the hour of waiting starts."""

    def evaluate(self, context: Any, check: Mapping[str, Any]) -> Any:
        result = super().evaluate(context, check)
        FIRST_CHECK.set()
        return result


def this_module() -> Any:
    """This module as the DAG file imports it (`benchmarks.slot_cases`). The worker runs as `__main__`, a second
    copy of the module with its own `FIRST_CHECK`; the sensor that runs is the DAG file's, so the actor must wait
    on that copy's event."""
    return importlib.import_module("benchmarks.slot_cases")


DAG_FILE: Final = '''"""The slot-seconds benchmark's DAGs (written by benchmarks/slot_cases.py; airflow dag file)."""
from datetime import datetime

from airflow.sdk import DAG

from benchmarks.slot_cases import ObservedDrainedSensor

NAMESPACE = "{{{{ dag_run.conf['namespace'] }}}}"
NAME = "{{{{ dag_run.conf['name'] }}}}"

with DAG("slot_poke", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as slot_poke:
    ObservedDrainedSensor(
        task_id="drained", namespace=NAMESPACE, name=NAME, mode="poke", poke_interval={poke}, timeout={timeout}
    )

with DAG("slot_reschedule", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as slot_reschedule:
    ObservedDrainedSensor(
        task_id="drained", namespace=NAMESPACE, name=NAME, mode="reschedule", poke_interval={poke}, timeout={timeout}
    )

with DAG("slot_deferrable", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as slot_deferrable:
    ObservedDrainedSensor(
        task_id="drained",
        namespace=NAMESPACE,
        name=NAME,
        deferrable=True,
        poke_interval={poke},
        timeout={timeout},
        recheck_interval={recheck},
    )
'''


def dag_file(folder: Path, *, poke_interval: float, timeout: float, recheck_interval: float) -> Path:
    path = folder / "slot_dags.py"
    path.write_text(DAG_FILE.format(poke=poke_interval, timeout=timeout, recheck=recheck_interval))
    return path


def load_dags(path: Path) -> dict[str, Any]:
    from airflow.sdk import DAG

    spec = importlib.util.spec_from_file_location("slot_dags", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {dag.dag_id: dag for dag in vars(module).values() if isinstance(dag, DAG)}


class Actor(threading.Thread):
    """The cluster's side: one lab hour after the sensor's first check, the kubelet confirms the pod's end."""

    def __init__(self, admin: kubernetes.client.ApiClient, clock: RemoteClock, namespace: str, pod: str, wait: float):
        super().__init__(name="slot-actor", daemon=True)
        self.admin, self.clock, self.namespace, self.pod, self.wait = admin, clock, namespace, pod, wait
        self.result: dict[str, Any] = {}
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            if not this_module().FIRST_CHECK.wait(FIRST_CHECK_BOUND):
                raise RuntimeError("the sensor never made its first check")
            start = self.clock.now()
            start_wall = time.time()
            reached = self.clock.wait_until(start.lab + self.wait)
            removed_wall = time.time()
            kubernetes.client.CoreV1Api(self.admin).delete_namespaced_pod(
                self.pod, self.namespace, grace_period_seconds=0
            )
            self.result = {
                "firstCheckLab": start.lab,
                "firstCheckWall": start_wall,
                "removedLab": reached.lab,
                "removedWall": removed_wall,
            }
        except BaseException as error:  # re-raised by the worker after dag.test()
            self.error = error


def _epoch(value: datetime | None) -> float | None:
    if value is None:
        return None
    return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()


def airflow_records(dag_id: str, run_id: str) -> dict[str, Any]:
    """The task's audit-log rows, its TaskReschedule rows and the task instance, as epoch seconds."""
    from airflow.models.log import Log
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.taskreschedule import TaskReschedule
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        ti = session.scalars(
            select(TaskInstance).where(
                TaskInstance.dag_id == dag_id, TaskInstance.run_id == run_id, TaskInstance.task_id == TASK_ID
            )
        ).one()
        events = session.scalars(
            select(Log)
            .where(Log.dag_id == dag_id, Log.run_id == run_id, Log.task_id == TASK_ID)
            .order_by(Log.dttm, Log.id)
        ).all()
        reschedules = session.scalars(
            select(TaskReschedule).where(TaskReschedule.ti_id == ti.id).order_by(TaskReschedule.id)
        ).all()
        return {
            "state": str(ti.state),
            "tryNumber": int(ti.try_number),
            "startDate": _epoch(ti.start_date),
            "endDate": _epoch(ti.end_date),
            "events": [{"event": e.event, "at": _epoch(e.dttm)} for e in events],
            "reschedules": [
                {
                    "startDate": _epoch(r.start_date),
                    "endDate": _epoch(r.end_date),
                    "rescheduleDate": _epoch(r.reschedule_date),
                }
                for r in reschedules
            ],
        }


def slot_intervals(events: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """(start, end) of each hold of a worker slot: a `running` row to the next row that leaves running."""
    intervals: list[tuple[float, float]] = []
    started: float | None = None
    for event in events:
        if event["at"] is None:
            continue
        if event["event"] == "running" and started is None:
            started = float(event["at"])
        elif event["event"] in LEAVES_RUNNING and started is not None:
            intervals.append((started, float(event["at"])))
            started = None
    if started is not None:
        raise RuntimeError(f"the audit log leaves the task running: {events}")
    return intervals


def handle(payload: dict[str, Any]) -> dict[str, Any]:
    from airflow.utils import db

    modes = [str(mode) for mode in payload["modes"]]
    unknown = [mode for mode in modes if mode not in MODES]
    if unknown:
        raise SystemExit(f"unknown modes {unknown}; known: {', '.join(MODES)}")
    speed, wait = float(payload["speed"]), float(payload["waitLabSeconds"])
    dag_path = dag_file(
        Path(payload["dagsFolder"]),
        poke_interval=float(payload["pokeIntervalLab"]) / speed,
        timeout=3 * wait / speed + 60,
        recheck_interval=float(payload["recheckIntervalLab"]) / speed,
    )
    timings = {"startedSeconds": time.perf_counter()}
    db.initdb()
    timings["initdbSeconds"] = time.perf_counter() - timings.pop("startedSeconds")
    dags = load_dags(dag_path)
    clock = RemoteClock(str(payload["clockUrl"]))
    admin = kubernetes.config.new_client_from_config(config_file=str(payload["kubeconfig"]))
    try:
        # warm-up, not reported: the first dag.test() in a process syncs the bundle and imports the sensor's,
        # the trigger's and the clients' code; every mode below then starts from the same warm process
        warm = time.perf_counter()
        one_run(dags["slot_deferrable"], admin, clock, 0.0)
        timings["warmUpSeconds"] = time.perf_counter() - warm
        # the removal's phase against the pokes: uniform in one poke interval, the same draws in every mode
        rng = random.Random(int(payload.get("seed", 8)))
        phases = [rng.uniform(0.0, float(payload["pokeIntervalLab"])) for _ in range(int(payload.get("repeat", 1)))]
        results = {}
        for mode in modes:
            began = time.perf_counter()
            results[mode] = {"runs": [one_run(dags[f"slot_{mode}"], admin, clock, wait + phase) for phase in phases]}
            timings[f"{mode}Seconds"] = time.perf_counter() - began
    finally:
        admin.close()
    return {"modes": results, "timings": timings}


def one_run(dag: Any, admin: kubernetes.client.ApiClient, clock: RemoteClock, wait: float) -> dict[str, Any]:
    """One `dag.test()` of the mode's DAG against a fresh wait; what Airflow recorded of it."""
    this_module().FIRST_CHECK.clear()
    namespace, pod = held_trainjob(admin, "slot")
    actor = Actor(admin, clock, namespace, pod, wait)
    actor.start()
    test_started = time.time()
    dag_run = dag.test(run_conf={"namespace": namespace, "name": TRAINJOB})
    test_ended = time.time()
    actor.join(FIRST_CHECK_BOUND)
    if actor.error is not None:
        raise actor.error
    records = airflow_records(dag_run.dag_id, dag_run.run_id)
    intervals = slot_intervals(records["events"])
    return {
        "dagRunState": str(dag_run.state),
        "records": records,
        "slots": [{"start": s, "end": e} for s, e in intervals],
        "slotSeconds": sum(e - s for s, e in intervals),
        "actor": actor.result,
        "dagTestSeconds": test_ended - test_started,
    }


if __name__ == "__main__":
    serve(handle)
