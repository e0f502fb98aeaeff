"""The controller's probes and metrics over real HTTP on loopback, the counters' meaning, and the command's checks
of its leader election and HTTP options (a bad value is a usage error before anything runs)."""

from __future__ import annotations

import aiohttp
import pytest
from click.testing import CliRunner

from airflow_provider_dispatch.cli.commands import main as dispatch_cli
from airflow_provider_dispatch.dispatch.assessment import Execution
from airflow_provider_dispatch.kueue.endpoints import Endpoints, Probes, parse_bind_address
from airflow_provider_dispatch.kueue.leader import ElectionConfig, NotLeaderError, WritePermit
from airflow_provider_dispatch.kueue.metrics import ControllerMetrics, check_result
from airflow_provider_dispatch.kueue.verdicts import Retry, Verdict
from airflow_provider_dispatch.kueue.workloads import PENDING, READY


def test_bind_addresses() -> None:
    assert parse_bind_address(":8080") == ("0.0.0.0", 8080)
    assert parse_bind_address("127.0.0.1:0") == ("127.0.0.1", 0)
    assert parse_bind_address("[::1]:9") == ("::1", 9)
    for bad in ("8080", "host:", "host:port", ":70000"):
        with pytest.raises(ValueError, match="HOST:PORT"):
            parse_bind_address(bad)


def test_each_verdict_counts_once_under_its_result() -> None:
    execution = Execution(job_id="j", submission="1", admission=2)
    metrics = ControllerMetrics()
    metrics.checked(Verdict(READY, "admitted", Retry.NONE, execution=execution), written=True, write_failed=False)
    metrics.checked(Verdict(READY, "admitted", Retry.NONE, execution=execution), written=False, write_failed=False)
    metrics.checked(Verdict(PENDING, "pods remain", Retry.WAITING), written=True, write_failed=False)
    metrics.checked(Verdict(PENDING, "settling", Retry.SETTLING, after=3.0), written=False, write_failed=True)
    metrics.checked(Verdict(None, "unreachable", Retry.TRANSIENT), written=False, write_failed=False)
    metrics.checked(Verdict(PENDING, "refused", Retry.REFUSED), written=True, write_failed=False)
    metrics.checked(Verdict(READY, "not a dispatch TrainJob", Retry.NONE), written=True, write_failed=False)
    assert dict(metrics.checks) == {
        "admitted": 2,
        "waiting": 1,
        "settling": 1,
        "unreachable": 1,
        "refused": 1,
        "not_dispatch": 1,
    }
    assert (metrics.admissions, metrics.waits) == (1, 1)  # an unchanged Ready entry is not a second admission
    assert dict(metrics.errors) == {"write": 1, "api": 1, "refused": 1}
    assert check_result(Verdict(READY, "", Retry.NONE)) == "not_dispatch"


async def test_the_probes_and_the_metrics_answer_over_http() -> None:
    problems: dict[str, str | None] = {"alive": None, "ready": "the caches are being filled"}
    metrics = ControllerMetrics(leader=True)
    endpoints = Endpoints(Probes(lambda: problems["alive"], lambda: problems["ready"]), metrics)
    port = await endpoints.start("127.0.0.1", 0)
    try:
        async with aiohttp.ClientSession(f"http://127.0.0.1:{port}") as http:

            async def get(path: str) -> tuple[int, str, str]:
                async with http.get(path) as answer:
                    return answer.status, await answer.text(), answer.headers.get("Content-Type", "")

            assert (await get("/healthz"))[:2] == (200, "ok\n")
            assert (await get("/readyz"))[:2] == (503, "the caches are being filled\n")
            problems["ready"] = None
            problems["alive"] = "leading, but the Lease was not renewed"
            assert (await get("/readyz"))[0] == 200
            assert (await get("/healthz"))[:2] == (500, "leading, but the Lease was not renewed\n")

            metrics.checked(Verdict(PENDING, "pods remain", Retry.WAITING), written=True, write_failed=False)
            metrics.waiting_workloads = 3
            status, text, content_type = await get("/metrics")
            assert status == 200
            assert content_type.startswith("text/plain; version=")  # Prometheus' text format
            lines = set(text.splitlines())
            assert 'dispatch_admission_checks_total{result="waiting"} 1.0' in lines
            assert 'dispatch_admission_checks_total{result="admitted"} 0.0' in lines
            assert "dispatch_admission_waits_total 1.0" in lines
            assert "dispatch_admission_admissions_total 0.0" in lines
            assert 'dispatch_admission_errors_total{kind="api"} 0.0' in lines
            assert "dispatch_admission_waiting_workloads 3.0" in lines
            assert "dispatch_admission_leader 1.0" in lines
            assert "# TYPE dispatch_admission_checks_total counter" in lines
    finally:
        await endpoints.stop()


def test_a_lease_whose_times_cannot_work_is_refused() -> None:
    with pytest.raises(ValueError, match="greater than the renew deadline"):
        ElectionConfig(namespace="ns", identity="a", lease_duration=10, renew_deadline=10)
    with pytest.raises(ValueError, match="retry period times"):
        ElectionConfig(namespace="ns", identity="a", renew_deadline=2.0, retry_period=2.0)
    with pytest.raises(ValueError, match="identity"):
        ElectionConfig(namespace="ns", identity="")


def test_without_election_every_write_is_permitted_and_with_it_none_before_leading() -> None:
    WritePermit().check("apply workloads/status")

    class NotLeading:
        def may_write(self) -> bool:
            return False

    with pytest.raises(NotLeaderError, match="apply workloads/status was not sent"):
        WritePermit(NotLeading()).check("apply workloads/status")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--leader-elect", "--lease-duration-seconds", "5", "--renew-deadline-seconds", "6"], "greater than"),
        (["--http-bind-address", "8080"], "HOST:PORT"),
    ],
)
def test_the_command_refuses_options_that_cannot_work(args: list[str], message: str) -> None:
    result = CliRunner().invoke(dispatch_cli, ["admission-controller", *args])
    assert result.exit_code == 2
    assert message in result.output


def test_metrics_without_the_controller_extra_stop_before_anything_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_provider_dispatch.kueue import endpoints

    monkeypatch.setattr(endpoints, "metrics_available", lambda: False)
    result = CliRunner().invoke(dispatch_cli, ["admission-controller", "--http-bind-address", ":8080"])
    assert result.exit_code == 4
    assert "needs the controller extra (missing: prometheus-client)" in result.output
    assert "pip install './[controller]' in a clone of airflow-provider-dispatch" in result.output
