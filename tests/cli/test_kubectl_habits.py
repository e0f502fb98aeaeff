"""`dispatch status`, `find` and `list` with kubectl's habits, against the lab over real HTTP.

`-n` and a bare NAME, `dispatch list` (every managed TrainJob, what blocks each, read off the Status the adapter
computes), `-o yaml|wide`, kubectl's durations for `--request-timeout` (checked against the real kubectl's
answers where its binary is cached), usage errors as documents under `-o json|yaml` (exit 2, nothing sent).
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from dispatch_lab.cluster import Cluster

from airflow_provider_dispatch.cli.durations import INVALID_TIMEOUT, parse_timeout
from airflow_provider_dispatch.dispatch import AsyncDispatchAdapter, DispatchAdapter, vocabulary

from .conftest import CliLab


@pytest.fixture(scope="module")
def kubectl() -> Path:
    """The real kubectl built with the control plane (`controlplane/build`), never built here: a test's time is
    bounded."""
    from airflow_provider_dispatch_lab.real.binaries import locate
    from airflow_provider_dispatch_lab.real.processes import ControlPlaneError

    try:
        return locate(build=False).bin / "kubectl"
    except ControlPlaneError as error:
        pytest.skip(f"no real kubectl: {error}")


def rows(text: str) -> list[dict[str, str]]:
    """A kubectl-style table as {column: value} per row (columns are separated by 2+ spaces)."""
    header, *lines = text.splitlines()
    names = re.split(r"\s{2,}", header.strip())
    return [dict(zip(names, re.split(r"\s{2,}", line.strip()), strict=True)) for line in lines]


def test_list_shows_each_managed_trainjob_and_what_blocks_it(cli_lab: CliLab, cluster: Cluster) -> None:
    runtime = cluster.runtime()
    node = cluster.node("n1")
    cluster.held_after_execution("ft-held", runtime=runtime, admission=3, job_id="train-a")
    _, (pod,) = cluster.held_after_execution("ft-lost", runtime=runtime, admission=1, pods_on=[node])
    cluster.lose_node(node)
    cluster.trainjob("ft-run", runtime=runtime, admission=2, suspend=False)
    cluster.trainer_observes("ft-run", suspended=False)
    cluster.trainjob("not-ours", runtime=runtime, dispatch_labels=False)
    ns = cluster.namespace

    mark = cli_lab.log.mark()
    result = cli_lab.run("list", "-n", ns)

    assert result.exit_code == 0, result.output
    table = rows(result.stdout)
    assert [row["NAME"] for row in table] == ["ft-held", "ft-lost", "ft-run"]  # not-ours carries no dispatch label
    by_name = {row["NAME"]: row for row in table}
    assert [by_name[n]["STATE"] for n in ("ft-held", "ft-lost", "ft-run")] == ["held", "waiting", "running"]
    assert [by_name[n]["ADMISSION"] for n in ("ft-held", "ft-lost", "ft-run")] == ["3", "1", "2"]
    assert by_name["ft-lost"]["BLOCKED BY"] == f"1 pod on {node} (Ready=Unknown)"
    assert by_name["ft-held"]["BLOCKED BY"] == by_name["ft-run"]["BLOCKED BY"] == "<none>"
    assert all(re.fullmatch(r"\d+s", row["AGE"]) for row in table), table
    assert {method for method, _ in cli_lab.log.since(mark)} == {"GET"}

    # -o json: exactly the Status each TrainJob's inspect returns, plus its creation time
    listed = json.loads(cli_lab.run("list", "-n", ns, "-o", "json").stdout)
    with DispatchAdapter.from_kubeconfig(cli_lab.kubeconfig, read_only=True) as adapter:
        expected = [adapter.inspect(f"{ns}/{name}").as_dict() for name in ("ft-held", "ft-lost", "ft-run")]
    assert [{k: v for k, v in item.items() if k != "created"} for item in listed["items"]] == expected
    assert listed["errors"] == []
    assert yaml.safe_load(cli_lab.run("list", "-n", ns, "-o", "yaml").stdout) == listed

    wide = rows(cli_lab.run("list", "-n", ns, "-o", "wide").stdout)
    assert (wide[1]["JOB ID"], wide[1]["SUBMISSION"], wide[1]["CAUSE"]) == ("ft-lost", "1", "pods remain")

    everywhere = rows(cli_lab.run("list", "-A").stdout)
    assert {(row["NAMESPACE"], row["NAME"]) for row in everywhere} >= {(ns, "ft-held"), (ns, "ft-lost")}

    # the operator confirms the shutdown and taints the node: the pod is ceased, and the row says so
    cluster.taint_out_of_service(node)
    tainted = {row["NAME"]: row for row in rows(cli_lab.run("list", "-n", ns).stdout)}
    assert tainted["ft-lost"]["BLOCKED BY"] == f"1 pod on {node} (Ready=Unknown, out-of-service)"
    cluster.podgc_force_deletes(pod)
    drained = {row["NAME"]: row for row in rows(cli_lab.run("list", "-n", ns).stdout)}
    assert (drained["ft-lost"]["STATE"], drained["ft-lost"]["BLOCKED BY"]) == ("held", "<none>")


def test_list_reports_a_trainjob_it_cannot_assess_and_exits_1(cli_lab: CliLab, cluster: Cluster) -> None:
    runtime = cluster.runtime()
    cluster.held_after_execution("ft-ok", runtime=runtime, admission=1)
    cluster.trainjob("ft-bad", runtime=runtime)
    path = vocabulary.TRAINJOB.path(cluster.namespace, "ft-bad")
    cluster.merge_patch(path, {"metadata": {"labels": {vocabulary.LABEL_SUBMISSION: None}}})

    text = cli_lab.run("list", "-n", cluster.namespace)
    as_json = cli_lab.run("list", "-n", cluster.namespace, "-o", "json")

    assert text.exit_code == as_json.exit_code == 1
    assert [row["NAME"] for row in rows(text.stdout)] == ["ft-ok"]
    assert f"TrainJob {cluster.namespace}/ft-bad is not managed by dispatch" in text.stderr
    (error,) = json.loads(as_json.stdout)["errors"]
    assert (error["error"]["type"], error["error"]["ref"]) == ("NotManagedError", f"{cluster.namespace}/ft-bad")


def test_an_empty_namespace_says_so_on_stderr(cli_lab: CliLab, cluster: Cluster) -> None:
    result = cli_lab.run("list", "-n", cluster.namespace)
    assert (result.exit_code, result.stdout) == (0, "")
    assert f"No TrainJobs managed by dispatch found in namespace {cluster.namespace}." in result.stderr


def test_namespace_flag_bare_name_and_yaml(cli_lab: CliLab, cluster: Cluster) -> None:
    cluster.held_after_execution("ft-1", runtime=cluster.runtime(), admission=2, job_id="train-b")
    ns = cluster.namespace

    slashed = json.loads(cli_lab.run("status", f"{ns}/ft-1", "-o", "json").stdout)
    bare = json.loads(cli_lab.run("status", "ft-1", "-n", ns, "-o", "json").stdout)
    both = json.loads(cli_lab.run("status", f"{ns}/ft-1", "--namespace", ns, "-o", "json").stdout)
    as_yaml = yaml.safe_load(cli_lab.run("status", "ft-1", "-n", ns, "-o", "yaml").stdout)
    found = json.loads(cli_lab.run("find", "--job-id", "train-b", "-n", ns, "-o", "json").stdout)

    assert slashed["state"] == "held"
    assert slashed == bare == both == as_yaml == found
    # without -n, the namespace is the kubeconfig context's, else default (kubectl's rule)
    assert json.loads(cli_lab.run("status", "ft-1", "-o", "json").stdout)["error"]["ref"] == "default/ft-1"


def test_usage_errors_under_machine_output_are_documents(cli_lab: CliLab) -> None:
    mark = cli_lab.log.mark()
    cases = [
        (["status", "ml/a,b", "-o", "json"], "TrainJob name 'a,b' is not allowed"),
        (["status", "ml/ft", "-n", "other", "-ojson"], "differs from --namespace 'other'"),
        (["list", "--bogus", "--output=json"], "No such option '--bogus'"),
        (["list", "--request-timeout", "0.5", "-o", "json"], INVALID_TIMEOUT),
        (["find", "--job-id", "x=y", "-o", "yaml"], "job id 'x=y' is not allowed"),
    ]
    for args, complaint in cases:
        result = cli_lab.run(*args)
        assert result.exit_code == 2, (args, result.output)
        document = yaml.safe_load(result.stdout)  # JSON is YAML: one parser reads both
        assert document["error"]["type"] == "UsageError", args
        assert document["error"]["retryable"] is False
        assert complaint in document["error"]["message"], (args, document)
    assert cli_lab.log.since(mark) == []
    plain = cli_lab.run("status", "ml/a,b")
    assert (plain.exit_code, plain.stdout) == (2, "")
    assert "is not allowed" in plain.stderr


@pytest.mark.parametrize(("text", "seconds"), [("5", 5.0), ("5s", 5.0), ("1m30s", 90.0), ("1.5s", 1.5)])
def test_request_timeout_takes_kubectl_durations(cli_lab: CliLab, cluster: Cluster, text: str, seconds: float) -> None:
    cluster.held_after_execution("ft-1", runtime=cluster.runtime(), admission=1)
    assert parse_timeout(text) == seconds
    result = cli_lab.run("status", f"{cluster.namespace}/ft-1", "--request-timeout", text)
    assert result.exit_code == 0, result.output


def test_request_timeout_of_zero_is_refused(cli_lab: CliLab) -> None:
    result = cli_lab.run("list", "--request-timeout", "0")
    assert result.exit_code == 2
    assert "give a duration above 0" in result.stderr


DURATIONS = [
    "5",
    "+5",
    "-1",
    "0.5",
    "5s",
    "1m30s",
    "1h2m3.5s",
    ".5s",
    "5.s",
    "500ms",
    "-1s",
    "2d",
    ".",
    "s",
    "1s2",
    "5 s",
]


def test_durations_are_read_as_the_real_kubectl_reads_them(cli_lab: CliLab, kubectl: Path) -> None:
    for text in DURATIONS:
        answer = subprocess.run(
            [
                str(kubectl),
                "--kubeconfig",
                str(cli_lab.kubeconfig),
                "get",
                "ns",
                "-o",
                "name",
                "--request-timeout",
                text,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        kubectl_refuses = "Invalid timeout value" in answer.stderr
        try:
            parse_timeout(text)
            we_refuse = False
        except ValueError:
            we_refuse = True
        assert we_refuse == kubectl_refuses, (text, answer.stderr)


def test_without_n_the_namespace_is_the_kubeconfig_contexts(cli_lab: CliLab, cluster: Cluster, tmp_path: Path) -> None:
    cluster.held_after_execution("ft-ctx", runtime=cluster.runtime(), admission=1)
    config = yaml.safe_load(cli_lab.kubeconfig.read_text())
    current = next(c for c in config["contexts"] if c["name"] == config["current-context"])
    current["context"]["namespace"] = cluster.namespace
    with_namespace = tmp_path / "kubeconfig.yaml"
    with_namespace.write_text(yaml.safe_dump(config))

    status = cli_lab.run("status", "ft-ctx", "-o", "json", kubeconfig=with_namespace)
    listed = cli_lab.run("list", kubeconfig=with_namespace)

    assert status.exit_code == 0, status.output
    assert json.loads(status.stdout)["ref"] == f"{cluster.namespace}/ft-ctx"
    assert [row["NAME"] for row in rows(listed.stdout)] == ["ft-ctx"]


def test_the_async_adapter_lists_as_the_sync_one(cli_lab: CliLab, cluster: Cluster) -> None:
    runtime = cluster.runtime()
    node = cluster.node("n1")
    cluster.held_after_execution("ft-1", runtime=runtime, admission=1)
    cluster.held_after_execution("ft-2", runtime=runtime, admission=2, pods_on=[node])

    now = datetime.now(UTC)  # one clock for both: the detail says how far a grace period's deadline is

    async def listed() -> list[dict[str, object]]:
        async with await AsyncDispatchAdapter.from_kubeconfig(cli_lab.kubeconfig, read_only=True) as adapter:
            return [
                entry.status.as_dict()
                for entry in await adapter.list_managed(cluster.namespace, now=now)
                if entry.status
            ]

    with DispatchAdapter.from_kubeconfig(cli_lab.kubeconfig, read_only=True) as adapter:
        expected = [
            entry.status.as_dict() for entry in adapter.list_managed(cluster.namespace, now=now) if entry.status
        ]
    assert [status["ref"] for status in expected] == [f"{cluster.namespace}/ft-1", f"{cluster.namespace}/ft-2"]
    assert asyncio.run(listed()) == expected


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("7", 7.0),
        ("+7", 7.0),
        ("2h", 7200.0),
        ("1h2m3.5s", 3723.5),
        (".5s", 0.5),
        ("5.s", 5.0),
        ("250ms", 0.25),
        ("3us", 3e-6),
        ("3\u00b5s", 3e-6),
        ("3\u03bcs", 3e-6),
        ("10ns", 1e-8),
        ("-1s", -1.0),
        ("0", 0.0),
    ],
)
def test_parse_timeout_reads_go_durations(text: str, seconds: float) -> None:
    assert parse_timeout(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["-1", "0.5", "2d", ".", "s", "1s2", "5 s", "", "1.2.3s", "1S"])
def test_parse_timeout_refuses_what_client_go_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="Invalid timeout value"):
        parse_timeout(text)


def test_blocked_by_names_an_unobserved_hold_and_a_pending_kueue_admission(cli_lab: CliLab, cluster: Cluster) -> None:
    runtime = cluster.runtime()
    cluster.trainjob("ft-unseen", runtime=runtime, admission=1)  # held, but Trainer has not observed it yet
    cluster.trainjob("ft-queued", runtime=runtime, admission=0, queue="team-a")  # Kueue mode, no Workload yet
    cluster.trainer_observes("ft-queued")
    cluster.jobset("ft-queued")

    table = {row["NAME"]: row for row in rows(cli_lab.run("list", "-n", cluster.namespace).stdout)}
    with DispatchAdapter.from_kubeconfig(cli_lab.kubeconfig, read_only=True) as adapter:
        unseen = adapter.inspect(f"{cluster.namespace}/ft-unseen")
        queued = adapter.inspect(f"{cluster.namespace}/ft-queued")

    assert (table["ft-unseen"]["STATE"], table["ft-unseen"]["BLOCKED BY"]) == ("waiting", unseen.cause)
    assert unseen.cause == "suspension not yet observed"
    assert (table["ft-queued"]["MODE"], table["ft-queued"]["STATE"]) == ("kueue", "held")
    assert table["ft-queued"]["BLOCKED BY"] == queued.cause == "waiting for Kueue: no Workload yet"


def test_age_is_measured_on_the_servers_clock_so_a_fast_lab_never_reads_invalid(
    cli_lab: CliLab, cluster: Cluster
) -> None:
    """A lab whose time runs faster than the wall clock (any `--speed` above 1) stamps creation times in this
    machine's future: AGE measured on the local clock read `<invalid>`. Measured on the server's, as kubectl's
    server-printed AGE is, it reads the lab's age."""
    cli_lab.advance(7200)  # lab time two hours ahead of the wall clock, as at speed 100 after 73 wall seconds
    cluster.held_after_execution("ft-ahead", runtime=cluster.runtime(), admission=1)
    cli_lab.advance(300)
    listed = rows(cli_lab.run("list", "-n", cluster.namespace).stdout)
    assert [(row["NAME"], row["AGE"]) for row in listed] == [("ft-ahead", "5m")]
    shown = rows(cli_lab.run("status", f"{cluster.namespace}/ft-ahead").stdout.split("\n\n")[0])
    assert shown[0]["AGE"] == "5m"
