"""The lost-node drill on real Airflow: the deferred sensor's wait reason, seen in headless Chromium.

Real processes (api-server, scheduler with the LocalExecutor, dag-processor, triggerer) run the repository's
drill (`example_dags/lost_node_drill.py`) against the lab: a TrainJob opens (execution A), the machine under
one of its pods freezes, the TrainJob is held, and `PodsDrainedSensor(deferrable=True)` waits in the triggerer
for the pod that the frozen machine will never confirm stopped. While the sensor is DEFERRED the test opens the
task instance in the UI and waits until the wait reason is on screen, naming the pod, its node and the node's
state (`Ready=Unknown`), in the Rendered Templates tab (the field `wait_reason`) and in the Logs tab (the
worker's line and the trigger's), saving a screenshot of each. The reason's first line is short and complete
(the pods, the node, `Ready=Unknown` and the one-line remedy, the taint command); the test measures where the
remedy is drawn in the Logs tab (with its Wrap setting on, the `w` shortcut) and in the XCom tab, and requires
every box of it inside the viewport and inside any box that clips it: readable without scrolling sideways (the
Rendered Templates tab does not wrap). Screenshots of both are kept.

The drill arms the lab's fencing agent for the frozen node; the test arms it for a billion lab seconds, so it
never acts: cessation is the test's to prove, and only after the UI was checked. It does what an operator
would (power the machine off, then taint the node out-of-service); the sensor ends `ceased`, PodGC removes the
pod, the release admits A+1, the new execution runs, and at no time did two executions run at once.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from browser_support import Artifacts, DrillLab
from deployment.airflow_stack import AirflowStack
from deployment.processes import wait_until
from ui_pages import (
    open_and_wait_for,
    press,
    screenshot,
    scroll_into_view,
    task_instance_url,
    wait_until_on_screen,
)

from airflow_provider_dispatch.dispatch.explain import taint_command

pytestmark = [pytest.mark.browser, pytest.mark.airflow, pytest.mark.slow, pytest.mark.timeout(1200)]

DAG_ID = "lost_node_drill"
DAG_FILE = "lost_node_drill.py"
SENSOR = "wait_ceased"
PODS = 2
#: lab seconds before the drill's fencing agent would fence the frozen node: never, within this test
NEVER = 1e9
#: failure bounds, seconds (a LocalExecutor task takes ~5 s to start here; the drill runs ten)
DEFERRED_BOUND = 300.0
FINISH_BOUND = 300.0


def run_states(stack: AirflowStack, run_id: str) -> str:
    tis = stack.rest.task_instances(DAG_ID, run_id)
    return ", ".join(f"{task}={ti.get('state')}" for task, ti in sorted(tis.items()))


def test_the_deferred_sensor_shows_pod_node_and_node_state_in_the_ui(
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

        # the first line is short and complete: the pods, their node, its state and the one-line remedy (once the
        # pods on the healthy nodes are gone, only the frozen node's remain)
        remedy = f"confirm {node} is powered off, then run `{taint_command(node)}`"
        pods_text = ("pod " if len(stuck) == 1 else "pods ") + ", ".join(stuck)
        headline = (
            f"waiting for the pods of TrainJob {namespace}/{name} to go: {pods_text} on {node} (Ready=Unknown): "
            f"{remedy}"
        )

        def deferred_with_reason() -> dict[str, Any] | None:
            ti = rest.task_instance(DAG_ID, run_id, SENSOR)
            reason = str((ti.get("rendered_fields") or {}).get("wait_reason", ""))
            shown = all(piece in reason for piece in expected) and reason.splitlines()[0] == headline
            return ti if ti.get("state") == "deferred" and shown else None

        ti = wait_until(
            f"{SENSOR} to be deferred with the wait reason {expected}, first line {headline!r}",
            deferred_with_reason,
            bound=DEFERRED_BOUND,
            services=airflow_stack.services,
            describe=lambda: f"{progress()}; {SENSOR}: {rest.task_instance(DAG_ID, run_id, SENSOR)}",
        )
        reason = str(ti["rendered_fields"]["wait_reason"])
        assert rest.xcom(DAG_ID, run_id, SENSOR, key="wait_reason") == reason
        first_line = reason.splitlines()[0]
        assert first_line == headline
        assert reason.splitlines()[1].startswith("remaining pods: ")  # the details follow on their own lines

        # --- what a person sees: Rendered Templates, then Logs -------------------------------------------------
        shown = open_and_wait_for(
            browser,
            task_instance_url(airflow_stack.base_url, DAG_ID, run_id, SENSOR, "rendered_templates"),
            ["wait_reason", *expected],
        )
        assert "Deferred" in shown
        scroll_into_view(browser, expected[0])
        artifacts.keep(screenshot(browser, artifacts.path("wait-reason-rendered-templates.png")))

        # the worker's line (the reason in full) and the trigger's, merged by Airflow into the one task log
        trigger_line = f"dispatch: TrainJob {namespace}/{name}: remaining pods:"
        open_and_wait_for(
            browser,
            task_instance_url(airflow_stack.base_url, DAG_ID, run_id, SENSOR),
            [first_line, trigger_line, *expected],
        )
        scroll_into_view(browser, expected[0])
        artifacts.keep(screenshot(browser, artifacts.path("wait-reason-logs.png")))
        # the remedy, readable in the log without scrolling sideways once the log view wraps its lines: a person
        # presses `w` (the Logs tab's Wrap shortcut; `[api] default_wrap = True` makes it the default)
        press(browser, "w")
        in_log = wait_until_on_screen(browser, remedy)
        artifacts.keep(screenshot(browser, artifacts.path("wait-reason-remedy-logs.png")))
        assert in_log["visible"], in_log
        artifacts.notes.append(f"remedy in the log: {in_log['boxes']} in a {in_log['viewport']} px wide viewport")

        # --- the XCom tab: the wait reason as a wrapped value, the remedy on screen --------------------------
        open_and_wait_for(
            browser,
            task_instance_url(airflow_stack.base_url, DAG_ID, run_id, SENSOR, "xcom"),
            ["wait_reason", remedy],
        )
        in_xcom = wait_until_on_screen(browser, remedy)
        artifacts.keep(screenshot(browser, artifacts.path("wait-reason-remedy-xcom.png")))
        assert in_xcom["visible"], in_xcom
        assert all(box["right"] <= in_xcom["viewport"] for box in in_xcom["boxes"])
        artifacts.notes.append(f"remedy in the XCom tab: {in_xcom['boxes']} in a {in_xcom['viewport']} px viewport")
        assert rest.task_instance(DAG_ID, run_id, SENSOR)["state"] == "deferred"  # still waiting: nothing proved

        # --- the operator proves cessation; the drill finishes ------------------------------------------------
        drill_lab.scenario.power_off(node)
        drill_lab.scenario.taint_out_of_service(node)
        run = wait_until(
            "the drill's run to finish",
            lambda: (found := rest.dag_run(DAG_ID, run_id)).get("state") in ("success", "failed") and found,
            bound=FINISH_BOUND,
            services=airflow_stack.services,
            describe=progress,
        )
        assert run["state"] == "success", progress()
        outcome = rest.xcom(DAG_ID, run_id, SENSOR)
        assert outcome["outcome"] == "ceased"
        assert sorted(entry["pod"] for entry in outcome["remaining"]) == stuck
        assert all(entry["node"] == node for entry in outcome["remaining"])
        assert all("out-of-service" in str(entry["node_state"]) for entry in outcome["remaining"])
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
        artifacts.notes.append(f"browser test body: {time.monotonic() - started:.1f} s")
