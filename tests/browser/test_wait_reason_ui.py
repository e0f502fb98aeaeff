"""Every wait reads at a glance, in a real browser: the first line of a wait reason, whole on screen in the UI.

Real processes (api-server, scheduler with the LocalExecutor, dag-processor, triggerer) run two DAGs against the
lab, and headless Chromium reads the UI in a 1366x768 window (a laptop's screen; `chromium.WINDOW`) with Airflow's
default settings (the log's Wrap off):

* the repository's lost-node drill (`example_dags/lost_node_drill.py`): a TrainJob opens, the machine under one of
  its pods freezes, the TrainJob is held, and `PodsDrainedSensor(deferrable=True)` waits in the triggerer for the
  pod that the frozen machine will never confirm stopped;
* the restart operator (`example_dags/restart_operator.py`): while submission 1 runs, the node under one of its
  pods goes not Ready, and the chain's outcome wait shows the new reason (the issue's example: its first line used
  to start with 105 characters of submission, TrainJob and execution before the remedy).

While each task is DEFERRED with the reason, the test opens the task instance in the Logs tab, the Rendered
Templates tab and Storage → XCom, and measures where the browser drew the reason's first line (`ui_pages.on_screen`:
a DOM range over that very text, its boxes against the viewport and against every box that clips them): in each of
the three places it must be inside the viewport, whole, without scrolling sideways. A screenshot of each is kept
(`artifacts`: `first-line-<dag>-<place>.png`).

The drill arms the lab's fencing agent for the frozen node; the test arms it for a billion lab seconds, so it
never acts: cessation is the test's to prove, and only after the UI was checked. It does what an operator
would (power the machine off, then taint the node out-of-service); the sensor ends `ceased`, PodGC removes the
pod, the release admits A+1, the new execution runs, and at no time did two executions run at once. The chain's
test ends once the UI is read: what the chain does next is `test_restart_operator_triggerer.py`'s.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from browser_support import Artifacts, DrillLab
from deployment.airflow_stack import AirflowStack
from deployment.processes import wait_until
from ui_pages import open_and_wait_for, screenshot, task_instance_url, wait_until_on_screen

from airflow_provider_dispatch.dispatch.explain import taint_command
from airflow_provider_dispatch.dispatch.payloads import GLANCE

pytestmark = [pytest.mark.browser, pytest.mark.airflow, pytest.mark.slow, pytest.mark.timeout(1200)]

#: Airflow 3.3's scheduler fails a deferred task whose trigger fired so soon that the resumed attempt is already
#: running when the executor's stale "success" of the deferring attempt arrives (apache/airflow#72716, open; fix
#: proposed in apache/airflow#72767). The chain's retries resume it from the cluster, but this test reads the UI of
#: one try at a time: a run failed on it is Airflow's doing, and the test says so instead of failing.
UPSTREAM_RACE = (
    "Airflow's stale defer-exit race (apache/airflow#72716) failed the task: the scheduler log says the executor "
    "reported the deferring attempt's success while the resumed attempt ran"
)
#: the scheduler's words for it: the resumed attempt is queued or already running when the stale event arrives
STALE_EVENTS = (
    "finished with state success, but the task instance's state attribute is running",
    "finished with state success, but the task instance's state attribute is queued",
)


def stale_defer_exit_event(airflow_stack: AirflowStack, dag_id: str) -> bool:
    """The scheduler failed the train task on a stale executor event (the upstream race), nothing else."""
    log = (airflow_stack.log_dir / "scheduler.log").read_text(errors="replace")
    return any(any(event in line for event in STALE_EVENTS) and f"{dag_id}.train" in line for line in log.splitlines())


DAG_ID = "lost_node_drill"
DAG_FILE = "lost_node_drill.py"
SENSOR = "wait_ceased"
PODS = 2
CHAIN_DAG_ID = "restart_operator"
CHAIN_DAG_FILE = "restart_operator.py"
CHAIN_TASK = "train"
#: lab seconds before the drill's fencing agent would fence the frozen node: never, within this test
NEVER = 1e9
#: failure bounds, seconds (a LocalExecutor task takes ~5 s to start here; the drill runs ten)
DEFERRED_BOUND = 300.0
FINISH_BOUND = 300.0
#: the three places of the UI where a waiting task's reason is read: the task instance's tab (its URL's last part)
PLACES = {"logs": "", "rendered-templates": "rendered_templates", "xcom": "xcom"}


def run_states(stack: AirflowStack, run_id: str, dag_id: str = DAG_ID) -> str:
    tis = stack.rest.task_instances(dag_id, run_id)
    return ", ".join(f"{task}={ti.get('state')}" for task, ti in sorted(tis.items()))


def deferred_with_first_line(
    stack: AirflowStack,
    dag_id: str,
    run_id: str,
    task_id: str,
    first_line: str,
    pieces: list[str],
    *,
    whole: bool = True,
) -> dict[str, Any]:
    """Wait until the task is DEFERRED and its rendered field `wait_reason` starts with `first_line` (the whole
    line; with `whole=False`, the line's beginning) and holds every piece; return the task instance."""

    def shown() -> dict[str, Any] | None:
        ti = stack.rest.task_instance(dag_id, run_id, task_id)
        reason = str((ti.get("rendered_fields") or {}).get("wait_reason", ""))
        lines = reason.splitlines()
        first = bool(lines) and (lines[0] == first_line if whole else lines[0].startswith(first_line))
        ready = first and all(piece in reason for piece in pieces)
        return ti if ti.get("state") == "deferred" and ready else None

    return wait_until(
        f"{task_id} to be deferred with the first line {first_line!r} and {pieces}",
        shown,
        bound=DEFERRED_BOUND,
        services=stack.services,
        describe=lambda: (
            f"{run_states(stack, run_id, dag_id)}; {task_id}: {stack.rest.task_instance(dag_id, run_id, task_id)}"
        ),
    )


def task_log_files(stack: AirflowStack, dag_id: str, run_id: str, task_id: str) -> str:
    """For a failure message: the task instance's state, and each log file of it on disk (the worker's, and one per
    triggerer job, `attempt=N.log.trigger.<job id>.log`, which a later deferral rewrites) with its last events."""
    ti = stack.rest.task_instance(dag_id, run_id, task_id)
    folder = stack.home / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}" / f"task_id={task_id}"
    parts = [f"{task_id}: state {ti.get('state')}, try {ti.get('try_number')}; files in {folder}:"]
    for path in sorted(folder.glob("attempt=*")):
        events = []
        for line in path.read_text(errors="replace").splitlines()[-4:]:
            try:
                events.append(str(json.loads(line).get("event", ""))[:160])
            except ValueError:
                events.append(line[:160])
        parts.append(f"  {path.name}: " + " | ".join(events))
    return "\n".join(parts)


def pods_running(
    stack: AirflowStack, lab: DrillLab, namespace: str, trainjob: str, describe: Callable[[], str]
) -> list[tuple[str, str]]:
    """Until every pod of the TrainJob runs; (pod, node) of each."""

    def running() -> list[tuple[str, str]] | None:
        found = lab.running_pods(namespace, trainjob)
        return found if len(found) == PODS else None

    return wait_until(
        f"the pods of {trainjob} to run", running, bound=DEFERRED_BOUND, services=stack.services, describe=describe
    )


def executor_caught_up(stack: AirflowStack, dag_id: str, run_id: str, task_id: str) -> None:
    """Until the scheduler has processed the executor's report of every worker run of the task so far: one
    `TaskInstance Finished` line in its log per `Pausing task as DEFERRED` in the task's log (each deferral is a
    worker run that ended)."""
    finished = f"TaskInstance Finished: dag_id={dag_id}, task_id={task_id}, run_id={run_id},"

    def caught_up() -> bool:
        deferrals = stack.rest.log_text(dag_id, run_id, task_id, 1).count("Pausing task as DEFERRED")
        reports = (stack.log_dir / "scheduler.log").read_text(errors="replace").count(finished)
        return deferrals > 0 and reports >= deferrals

    wait_until(f"the scheduler to take in {task_id}'s executor reports", caught_up, bound=DEFERRED_BOUND)


def first_line_whole_everywhere(
    browser: Any, artifacts: Artifacts, stack: AirflowStack, dag_id: str, run_id: str, task_id: str, first_line: str
) -> None:
    """In each place of the UI, the reason's first line is drawn whole inside the viewport, nothing clipping it
    (`ui_pages.on_screen`: the DOM range over that very text against the viewport and every clipping box); one
    screenshot per place. The Logs tab is read as Airflow shows it by default: its Wrap setting off."""
    for place, tab in PLACES.items():
        open_and_wait_for(browser, task_instance_url(stack.base_url, dag_id, run_id, task_id, tab), [first_line])
        found = wait_until_on_screen(browser, first_line)
        artifacts.keep(screenshot(browser, artifacts.path(f"first-line-{dag_id}-{place}.png")))
        assert found["found"], f"{place}: the first line is not drawn: {found}"
        assert found["visible"], f"{place}: the first line is not whole on screen: {found}"
        assert all(box["left"] >= 0 and box["right"] <= found["viewport"] for box in found["boxes"]), found
        artifacts.notes.append(
            f"{dag_id} {place}: first line ({len(first_line)} characters) drawn in {found['boxes']} of a "
            f"{found['viewport']}x{found['height']} px viewport"
        )


def test_the_deferred_sensor_shows_what_to_do_first_whole_in_the_ui(
    drill_lab: DrillLab, airflow_stack: AirflowStack, browser: Any, artifacts: Artifacts, namespace: str
) -> None:
    started = time.monotonic()
    rest, name = airflow_stack.rest, "drill"
    try:
        airflow_stack.wait_for_dag(DAG_ID, DAG_FILE)
        rest.unpause(DAG_ID)
        conf = {
            "namespace": namespace,
            "name": name,
            "num_nodes": PODS,
            "fence_after_seconds": NEVER,
            "chaos_conn_id": "lab_admin",
        }
        run_id = rest.trigger(DAG_ID, conf)

        def progress() -> str:
            return run_states(airflow_stack, run_id)

        # --- the drill runs until the sensor waits in the triggerer for the frozen machine's pod ---------------
        frozen: dict[str, Any] = wait_until(
            "the drill to freeze a node",
            lambda: (
                rest.task_instance(DAG_ID, run_id, "freeze_node").get("state") == "success"
                and rest.xcom(DAG_ID, run_id, "freeze_node")
            ),
            bound=DEFERRED_BOUND,
            services=airflow_stack.services,
            describe=progress,
        )
        node = frozen["node"]
        first_pods = rest.xcom(DAG_ID, run_id, "wait_running")
        stuck = sorted(place["pod"] for place in first_pods if place["node"] == node)
        assert frozen["pod"] in stuck
        expected = [f"{pod} on {node} (Ready=Unknown)" for pod in stuck]

        # what to do first, and its subject (the node and its state), within a glance; the exact command next, then
        # what the sensor waits for (once the pods on the healthy nodes are gone, only the frozen node's remain)
        first_line = f"Confirm {node} is powered off, then taint it out-of-service (Ready=Unknown)"
        assert len(first_line) <= GLANCE
        ti = deferred_with_first_line(airflow_stack, DAG_ID, run_id, SENSOR, first_line, expected)
        reason = str(ti["rendered_fields"]["wait_reason"])
        assert rest.xcom(DAG_ID, run_id, SENSOR, key="wait_reason") == reason
        lines = reason.splitlines()
        assert lines[1] == taint_command(node)
        assert lines[2].startswith("Needs permission to patch nodes. ")
        assert lines[2].endswith(" Runbook: docs/runbook.md#confirm-the-shutdown")
        assert (
            f"Waiting until the pods of TrainJob {namespace}/{name} (execution 1) are gone or proven stopped." in lines
        )
        # the worker's reason and the trigger's line, merged by Airflow into the one task log, both lead with it
        trigger_line = f"{first_line} (dispatch: TrainJob {namespace}/{name}; the trigger waits for a pod or node"

        def with_trigger_line() -> str | None:
            text = rest.log_text(DAG_ID, run_id, SENSOR, 1)
            return text if trigger_line in text else None

        log = wait_until(
            "the trigger's line in the task log",
            with_trigger_line,
            bound=DEFERRED_BOUND,
            services=airflow_stack.services,
            describe=lambda: task_log_files(airflow_stack, DAG_ID, run_id, SENSOR),
        )
        assert f"\n{first_line}\n{taint_command(node)}\n" in log  # the worker's: the reason in full

        # --- what a person sees at 1366x768: Logs, Rendered Templates, Storage → XCom ------------------------
        first_line_whole_everywhere(browser, artifacts, airflow_stack, DAG_ID, run_id, SENSOR, first_line)
        assert rest.task_instance(DAG_ID, run_id, SENSOR)["state"] == "deferred"  # still waiting: nothing proved

        # --- the operator proves cessation; the drill finishes ------------------------------------------------
        drill_lab.scenario.power_off(node)
        drill_lab.scenario.taint_out_of_service(node)
        run = airflow_stack.wait_run_finished(DAG_ID, run_id, FINISH_BOUND, progress)
        assert run["state"] == "success", progress()
        outcome = rest.xcom(DAG_ID, run_id, SENSOR)
        # the taint proves the machine's end, and PodGC then removes its Terminating pods at its next pass (every
        # 20 s of lab time): a check before that pass finds them on a ceased node, one after finds none. Which comes
        # first is the triggerer's speed against PodGC's (CI failed once, loaded, on "drained"); both prove it.
        assert outcome["outcome"] in ("ceased", "drained"), outcome
        if outcome["outcome"] == "ceased":
            assert sorted(entry["pod"] for entry in outcome["remaining"]) == stuck
            assert all(entry["node"] == node for entry in outcome["remaining"])
            assert all("out-of-service" in str(entry["node_state"]) for entry in outcome["remaining"])
        else:
            assert outcome["remaining"] == [], outcome
        opened, released = rest.xcom(DAG_ID, run_id, "open"), rest.xcom(DAG_ID, run_id, "release")
        assert int(released["admission"]) == int(opened["admission"]) + 1
        assert released["job_id"] == opened["job_id"]
        again = rest.xcom(DAG_ID, run_id, "wait_running_again")
        assert {place["admission"] for place in again} == {str(released["admission"])}
        assert node not in {place["node"] for place in again}
        assert drill_lab.scenario.overlaps(namespace, name) == []
        artifacts.notes.append(
            f"drill: node {node} froze under {stuck}; outcome {outcome['outcome']}; "
            f"admission {opened['admission']} -> {released['admission']}"
        )
    except BaseException:
        print(airflow_stack.report())
        raise
    finally:
        artifacts.notes.append(f"browser test body (drill): {time.monotonic() - started:.1f} s")


def test_the_restart_chain_shows_what_to_do_first_whole_in_the_ui(
    drill_lab: DrillLab, airflow_stack: AirflowStack, browser: Any, artifacts: Artifacts, namespace: str
) -> None:
    started = time.monotonic()
    rest, scenario = airflow_stack.rest, drill_lab.scenario
    try:
        airflow_stack.wait_for_dag(CHAIN_DAG_ID, CHAIN_DAG_FILE)
        rest.unpause(CHAIN_DAG_ID)
        # the training runs for as long as the test reads the UI, and stays on a node that stops reporting (no
        # taint-based eviction fails it meanwhile)
        runtime = drill_lab.finite_runtime(stay_on_lost_nodes=True)
        conf = {"namespace": namespace, "name": "chain", "runtime": runtime, "max_restarts": 1}
        run_id = rest.trigger(CHAIN_DAG_ID, conf)

        def progress() -> str:
            return run_states(airflow_stack, run_id, CHAIN_DAG_ID)

        about_chain = [
            "Restart chain, submission 1 of at most 2.",
            f"TrainJob {namespace}/chain-1 runs execution 1; waiting for execution 1 to finish (Complete or Failed).",
        ]

        def chain_failed_upstream() -> None:
            if rest.dag_run(CHAIN_DAG_ID, run_id).get("state") == "failed" and stale_defer_exit_event(
                airflow_stack, CHAIN_DAG_ID
            ):
                pytest.skip(UPSTREAM_RACE)

        running = pods_running(airflow_stack, drill_lab, namespace, "chain-1", progress)
        pod, node = running[0]
        try:
            # nothing blocks the training: the chain waits deferred, and the scheduler has taken in the executor's
            # report of every attempt so far, so the next resume cannot meet a stale one (apache/airflow#72716).
            # The reason is the one its last check showed: "Waiting for the training to finish; nothing blocks it
            # (...)", or, when that check came while the pods started, "Waiting for 1 pod to start (...)". Pods
            # that only start are no progress (`unfinished.fingerprint`), so the worker shows their start only at
            # the trigger's full re-check; the node's change below is progress either way.
            deferred_with_first_line(
                airflow_stack, CHAIN_DAG_ID, run_id, CHAIN_TASK, "Waiting for ", about_chain, whole=False
            )
            executor_caught_up(airflow_stack, CHAIN_DAG_ID, run_id, CHAIN_TASK)
        except AssertionError:
            chain_failed_upstream()
            raise
        scenario.set_not_ready(node)
        # the outcome trigger reports the change; the chain shows what to do first, then its submission
        first_line = f"Confirm {node} is powered off, then taint it out-of-service (Ready=False)"
        try:
            ti = deferred_with_first_line(
                airflow_stack, CHAIN_DAG_ID, run_id, CHAIN_TASK, first_line, [pod, *about_chain]
            )
        except AssertionError:
            chain_failed_upstream()
            raise
        lines = str(ti["rendered_fields"]["wait_reason"]).splitlines()
        assert lines[1] == taint_command(node)
        assert lines.index(about_chain[0]) + 1 == lines.index(about_chain[1])  # the chain's line, then the TrainJob's

        first_line_whole_everywhere(browser, artifacts, airflow_stack, CHAIN_DAG_ID, run_id, CHAIN_TASK, first_line)

        # the chain goes on from here as test_restart_operator_triggerer.py shows (the stack stops with the module)
        assert drill_lab.running_pods(namespace, "chain-2") == []  # still submission 1: nothing restarted
    except BaseException:
        print(airflow_stack.report())
        raise
    finally:
        artifacts.notes.append(f"browser test body (restart chain): {time.monotonic() - started:.1f} s")
