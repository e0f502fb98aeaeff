"""The hooks on the cncf-kubernetes `kubernetes` connection, the one error mapping, the version guard.

The connections are real Airflow connections from the environment (`AIRFLOW_CONN_KUBERNETES_DEFAULT` points at
the lab's `writer` kubeconfig, conftest); the adapters talk to the lab over HTTP.
"""

from __future__ import annotations

import copy
import importlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException
from airflow_lab import AirflowEnvironment, AirflowLab
from dispatch.support import NAME, NS, node, pod, standard_api
from dispatch_lab.cluster import Cluster

from airflow_provider_dispatch.dispatch import errors as dispatch_errors
from airflow_provider_dispatch.dispatch import programs, vocabulary
from airflow_provider_dispatch.dispatch.assessment import State
from airflow_provider_dispatch.dispatch.errors import DispatchError, RefusedError
from airflow_provider_dispatch.dispatch.fencing import ExecutionPods
from airflow_provider_dispatch.dispatch.operations import Operations
from airflow_provider_dispatch.get_provider_info import get_provider_info
from airflow_provider_dispatch.hooks.checks import DrainCheck, drain_check
from airflow_provider_dispatch.hooks.dispatch import (
    TRIGGERER_USER_AGENT,
    WORKER_USER_AGENT,
    AsyncDispatchHook,
    DispatchHook,
    connection_key,
)
from airflow_provider_dispatch.hooks.errors import (
    DISPATCH_ERROR_CLASSES,
    airflow_exception,
    error_event,
    exception_for_event,
)
from airflow_provider_dispatch.version_compat import MINIMUM_AIRFLOW, require_supported_airflow

pytestmark = pytest.mark.airflow

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 8, 21, 10, 5, tzinfo=UTC)


@pytest.fixture
def held(cluster: Cluster) -> str:
    cluster.held_after_execution("ft-7", runtime=cluster.runtime(), admission=2)
    return f"{cluster.namespace}/ft-7"


def test_the_sync_hook_uses_the_kubernetes_connection(
    airflow_env: AirflowEnvironment, airflow_lab: AirflowLab, held: str
) -> None:
    hook = DispatchHook()  # kubernetes_default, from the environment
    adapter = hook.get_adapter(read_only=True)
    assert adapter.inspect(held).state is State.HELD
    assert hook.get_adapter(read_only=True) is adapter  # one adapter per options, over the hook's one client
    assert hook.get_adapter().api_client is adapter.api_client
    assert adapter.api_client.user_agent == WORKER_USER_AGENT
    assert hook.trigger_connection_kwargs() == {
        "kubernetes_conn_id": "kubernetes_default",
        "connection_extras": airflow_lab.connection("writer"),
        "cluster_context": None,
        "config_file": None,
        "in_cluster": None,
    }


def test_a_connection_the_worker_lacks_is_refused_not_left_to_the_triggerer(
    airflow_env: AirflowEnvironment,
) -> None:
    """The worker checks before it defers, with the same connection: a connection it lacks is a refusal there
    (issue 17 item 5), never a lookup left to the triggerer's environment or a fall back to an ambient one."""
    with pytest.raises(AirflowFailException, match="'kubernetes_only_on_the_triggerer' does not exist"):
        DispatchHook("kubernetes_only_on_the_triggerer").trigger_connection_kwargs()
    with pytest.raises(AirflowFailException, match="'kubernetes_only_on_the_triggerer' does not exist"):
        DispatchHook("kubernetes_only_on_the_triggerer").get_adapter()


def test_without_a_connection_the_trigger_kwargs_carry_no_extras(airflow_env: AirflowEnvironment) -> None:
    kwargs = DispatchHook(None).trigger_connection_kwargs()
    assert (kwargs["kubernetes_conn_id"], kwargs["connection_extras"]) == (None, None)


async def test_the_async_hook_with_extras_needs_no_connection(airflow_lab: AirflowLab, held: str) -> None:
    """The conn id exists nowhere: with the worker's extras in hand the hook never looks it up."""
    hook = AsyncDispatchHook("exists_nowhere", connection_extras=airflow_lab.connection("reader"))
    adapter = await hook.get_adapter()
    try:
        assert adapter.read_only
        assert adapter.api_client.user_agent == TRIGGERER_USER_AGENT
        assert (await adapter.inspect(held)).state is State.HELD
    finally:
        await adapter.close()


async def test_the_async_hook_looks_the_connection_up_without_extras(
    airflow_env: AirflowEnvironment, held: str
) -> None:
    adapter = await AsyncDispatchHook("kubernetes_reader").get_adapter()
    try:
        assert (await adapter.inspect(held)).state is State.HELD
    finally:
        await adapter.close()


@pytest.fixture
def reader_kubeconfig_text(airflow_lab: AirflowLab) -> str:
    return Path(airflow_lab.kubeconfigs["reader"]).read_text()


async def test_the_async_hook_takes_an_inline_kubeconfig_and_the_ssl_switch(
    reader_kubeconfig_text: str, held: str
) -> None:
    inline = reader_kubeconfig_text
    hook = AsyncDispatchHook(None, connection_extras={"kube_config": inline, "disable_verify_ssl": "true"})
    configuration = await hook.load_configuration()
    assert configuration.verify_ssl is False
    adapter = await hook.get_adapter()
    try:
        assert (await adapter.inspect(held)).state is State.HELD
    finally:
        await adapter.close()


@pytest.mark.parametrize(
    ("extras", "arguments", "message"),
    [
        ({"in_cluster": True, "kube_config_path": "/k"}, {}, "in_cluster and kube_config_path"),
        ({"kube_config": "{}", "kube_config_path": "/k"}, {}, "kube_config and kube_config_path"),
        ({"kube_config": "apiVersion: v1"}, {"in_cluster": True}, "in_cluster and kube_config"),
        ({}, {"config_file": "/nonexistent/kubeconfig"}, "no kubeconfig was found at /nonexistent/kubeconfig"),
        ({"kube_config": "- a\n- list"}, {}, "is not a kubeconfig"),
    ],
)
async def test_the_async_hook_refuses_a_bad_configuration(
    extras: dict[str, Any], arguments: dict[str, Any], message: str
) -> None:
    hook = AsyncDispatchHook("c", connection_extras=extras, **arguments)
    with pytest.raises(RefusedError, match=message):
        await hook.get_adapter()


def test_connection_keys_are_equal_exactly_for_equal_connections() -> None:
    base = {"kubernetes_conn_id": "k", "connection_extras": {"a": 1, "b": 2}}
    assert connection_key(base) == connection_key({"connection_extras": {"b": 2, "a": 1}, "kubernetes_conn_id": "k"})
    assert connection_key(base) != connection_key({**base, "cluster_context": "other"})


# --- the one error mapping --------------------------------------------------------------------------------

REFUSALS = sorted(name for name, cls in DISPATCH_ERROR_CLASSES.items() if issubclass(cls, RefusedError))
UNREACHABLE = sorted(
    name for name, cls in DISPATCH_ERROR_CLASSES.items() if issubclass(cls, dispatch_errors.UnreachableError)
)


def build(name: str) -> DispatchError:
    cls = DISPATCH_ERROR_CLASSES[name]
    if cls is dispatch_errors.PodsRemainError:
        return cls("ns/ft-7", [])
    return cls(f"ns/ft-7: a {name}", ref="ns/ft-7")


@pytest.mark.parametrize(
    ("name", "expected"),
    [(name, AirflowFailException) for name in REFUSALS] + [(name, AirflowException) for name in UNREACHABLE],
)
def test_every_dispatch_error_maps_by_its_family_for_tasks_and_for_events(
    name: str, expected: type[AirflowException]
) -> None:
    error = build(name)
    for mapped in (airflow_exception(error), exception_for_event(error_event(error, ref="ns/ft-7"))):
        assert type(mapped) is expected
        assert str(mapped) == error.message


def test_the_mapping_covers_both_families() -> None:
    assert {"NotFoundError", "ForbiddenError", "NotManagedError", "FinishedError"} <= set(REFUSALS)
    assert {"PodsRemainError", "ConflictError", "SuspensionNotObservedError"} <= set(UNREACHABLE)


def test_an_unknown_error_class_in_an_event_is_retryable() -> None:
    mapped = exception_for_event({"status": "error", "error_class": "KeyError", "message": "boom", "ref": "ns/x"})
    assert (type(mapped), str(mapped)) == (AirflowException, "boom")


# --- version guard and provider info ----------------------------------------------------------------------


@pytest.mark.parametrize(("version", "refused"), [((2, 11, 0), True), ((3, 2, 2), True), (MINIMUM_AIRFLOW, False)])
def test_the_version_guard(version: tuple[int, int, int], refused: bool) -> None:
    if refused:
        with pytest.raises(RuntimeError, match=r"needs Apache Airflow 3\.3\.0\+"):
            require_supported_airflow(version)
    else:
        require_supported_airflow(version)


def test_every_module_the_provider_info_lists_imports() -> None:
    info = get_provider_info()
    modules = [
        module
        for kind in ("hooks", "operators", "sensors", "triggers")
        for entry in info[kind]
        for module in entry["python-modules"]
    ]
    assert len(modules) == 7
    for module in modules:
        importlib.import_module(module)
    assert "connection-types" not in info  # the cncf `kubernetes` type is reused, never declared again


def test_the_provider_info_is_valid_and_its_how_to_guides_exist() -> None:
    from airflow.providers_manager import _create_provider_info_schema_validator

    info = get_provider_info()
    _create_provider_info_schema_validator().validate(info)  # what Airflow's provider manager checks
    (integration,) = info["integrations"]
    guides = integration["how-to-guide"]
    assert guides
    for guide in guides:
        assert guide.startswith("/docs/"), guide
        assert (ROOT / guide.lstrip("/")).is_file(), f"{guide} is not a page of docs/"
    for kind in ("hooks", "operators", "sensors", "triggers"):
        assert {entry["integration-name"] for entry in info[kind]} == {integration["integration-name"]}


def test_a_poke_reads_and_decides_as_remaining_pods_does() -> None:
    """`drain_check` runs the core's `programs.drain`: after its one GET of the TrainJob, the same pod and node
    reads as `programs.remaining_pods`, and the same report (a vanished pod on a lost node included)."""
    terminating = pod("a", node="n2", deletion="2026-08-21T10:00:30Z")
    runs = []
    for program in (
        drain_check(f"{NS}/{NAME}", Operations(), now=NOW),
        programs.remaining_pods(f"{NS}/{NAME}", now=NOW),
    ):
        api = standard_api(admission="1")
        held = api.get(vocabulary.TRAINJOB, NS, NAME)
        assert held is not None
        record = ExecutionPods(1, {"n1": ("p-0",)}).to_annotation()
        held["metadata"].setdefault("annotations", {})[vocabulary.ANNOTATION_EXECUTION_PODS] = record
        api.nodes["n1"] = node("n1", ready="Unknown")
        api.pods.append(copy.deepcopy(terminating))
        result = programs.drive(program, api.respond)
        report = result.report if isinstance(result, DrainCheck) else result
        runs.append((api.requests, report))
    (check_requests, check_report), (remaining_requests, remaining_report) = runs
    assert check_requests == remaining_requests
    assert check_report == remaining_report
    assert [p.name for p in check_report.remaining] == ["a", "p-0"]
