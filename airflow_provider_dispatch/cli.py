"""The `dispatch` command: status and find for a person or a script, and the lab.

Kept free of Airflow imports so that `dispatch status` and `dispatch lab` start in a fraction of the time
`airflow` takes; the Kubernetes client is imported only by the commands that talk to a cluster.

`dispatch status` and `dispatch find` write nothing: they run on a read-only adapter, which refuses any write
before it is sent (dispatch/sync_adapter.py). Their arguments are validated before the kubeconfig is even
read, so a name such as `a,b` is a usage error (exit 2) and never becomes a request. Exit codes are
`status_view.EXIT_*`: 0 the status was printed; 1 refused (not found, not managed by dispatch, forbidden, an
unloadable kubeconfig); 2 usage; 3 unreachable or a failed call worth retrying.
"""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click

from airflow_provider_dispatch import __version__
from airflow_provider_dispatch.dispatch.assessment import Status
from airflow_provider_dispatch.dispatch.errors import DispatchError, InvalidNameError
from airflow_provider_dispatch.dispatch.evidence import DEFAULT_SETTLE_SECONDS
from airflow_provider_dispatch.dispatch.policy import RISKS
from airflow_provider_dispatch.dispatch.validation import Ref, parse_ref, validate_job_id, validate_namespace
from airflow_provider_dispatch.extras import require_lab_extra
from airflow_provider_dispatch.status_view import creation_time, error_dict, exit_code, render_json, render_text

if TYPE_CHECKING:
    from airflow_provider_dispatch.dispatch.sync_adapter import DispatchAdapter


@click.group()
@click.version_option(__version__, prog_name="dispatch")
def main() -> None:
    """Restart Kubeflow Trainer TrainJobs without ever running two executions at once."""


# --- status and find ------------------------------------------------------------------------------------------


def _valid(check: Callable[[str], object]) -> Callable[[click.Context, click.Parameter, str], str]:
    """A click callback that turns an `InvalidNameError` into a usage error (exit 2) before anything runs."""

    def callback(ctx: click.Context, param: click.Parameter, value: str) -> str:
        try:
            check(value)
        except InvalidNameError as error:
            raise click.BadParameter(error.message, ctx=ctx, param=param) from None
        return value

    return callback


def _cluster_options(command: Callable[..., None]) -> Callable[..., None]:
    """The options every command that reads a cluster takes, kubectl's names where kubectl has one."""
    options = [
        click.option(
            "--kubeconfig",
            type=click.Path(dir_okay=False, path_type=Path),
            default=None,
            help="Kubeconfig file to use (default: $KUBECONFIG, else ~/.kube/config).",
        ),
        click.option("--context", default=None, help="Kubeconfig context to use (default: its current context)."),
        click.option(
            "--output",
            "-o",
            type=click.Choice(["text", "json"]),
            default="text",
            show_default=True,
            help="text for a person; json (Status.as_dict()) for a script.",
        ),
        click.option(
            "--request-timeout",
            type=click.FloatRange(min=0, min_open=True),
            default=None,
            help="Seconds to wait for each API call to connect and to answer (default: 10 to connect, 60 to answer).",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _report(
    read: Callable[[DispatchAdapter, datetime], Status],
    kubeconfig: Path | None,
    context: str | None,
    output: str,
    request_timeout: float | None,
) -> None:
    """Run one read on a read-only adapter and print the status, or the error with its exit code."""
    from airflow_provider_dispatch.dispatch.sync_adapter import DispatchAdapter

    now = datetime.now(UTC)
    options = {} if request_timeout is None else {"request_timeout": (request_timeout, request_timeout)}
    try:
        with DispatchAdapter.from_kubeconfig(kubeconfig, context=context, read_only=True, **options) as adapter:
            status = read(adapter, now)
            created = _created(adapter, status.ref) if output == "text" else None
    except DispatchError as error:
        if output == "json":
            click.echo(json.dumps(error_dict(error), indent=2))
        else:
            click.echo(f"Error: {error.message}", err=True)
        raise click.exceptions.Exit(exit_code(error)) from None
    click.echo(render_json(status) if output == "json" else render_text(status, created=created, now=now))


def _created(adapter: DispatchAdapter, ref: str) -> datetime | None:
    """The TrainJob's creation time, for AGE only: a failed read shows `<unknown>` rather than failing."""
    from airflow_provider_dispatch.dispatch import vocabulary
    from airflow_provider_dispatch.dispatch.programs import ApiFailure, GetObject

    target = parse_ref(ref)
    answer = adapter.respond(GetObject(vocabulary.TRAINJOB, target.namespace, target.name))
    return None if isinstance(answer, ApiFailure) else creation_time(answer)


@main.command()
@click.argument("ref", metavar="NAMESPACE/NAME", callback=_valid(parse_ref))
@_cluster_options
def status(ref: str, kubeconfig: Path | None, context: str | None, output: str, request_timeout: float | None) -> None:
    """Show the state of one TrainJob: its execution, and what keeps it from running.

    While pods of the previous execution remain, it lists each with its node's state and says what would
    unblock it. It writes nothing.
    """
    target: Ref = parse_ref(ref)
    _report(lambda adapter, now: adapter.inspect(target, now=now), kubeconfig, context, output, request_timeout)


@main.command()
@click.argument("namespace", callback=_valid(validate_namespace))
@click.option("--job-id", required=True, callback=_valid(validate_job_id), help="The dispatch job id to find.")
@_cluster_options
def find(
    namespace: str,
    job_id: str,
    kubeconfig: Path | None,
    context: str | None,
    output: str,
    request_timeout: float | None,
) -> None:
    """Show the newest TrainJob of a job id in NAMESPACE (its current submission), as `status` does.

    It writes nothing.
    """
    _report(lambda adapter, now: adapter.find(namespace, job_id, now=now), kubeconfig, context, output, request_timeout)


# --- the lab --------------------------------------------------------------------------------------------------


@main.group()
@click.pass_context
def lab(ctx: click.Context) -> None:
    """The local Kubernetes API lab: a loopback API server with a simulated cluster."""
    require_lab_extra(f"dispatch lab {ctx.invoked_subcommand}")


@lab.command("serve")
@click.option("--port", default=0, show_default=True, help="Loopback port; 0 picks a free one.")
@click.option("--speed", default=100.0, show_default=True, help="How much faster than real time lab time runs.")
@click.option(
    "--kubeconfig",
    "kubeconfig_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("lab-kubeconfig.yaml"),
    show_default="lab-kubeconfig.yaml",
    help="Where to write the kubeconfig that reaches the lab.",
)
@click.option(
    "--nodes",
    default=3,
    show_default=True,
    type=click.IntRange(min=0),
    help="Nodes to register (node-1, node-2, ...), each with its simulated kubelet.",
)
@click.option(
    "--bare",
    is_flag=True,
    help="Serve the API only: no simulated controllers (Trainer, JobSet, Job, kubelets, Kueue ...) and no nodes.",
)
def serve(port: int, speed: float, kubeconfig_path: Path, nodes: int, bare: bool) -> None:
    """Serve the lab, with its simulated cluster, until interrupted."""
    from airflow_provider_dispatch.lab.presets import ClusterShape, cluster_controllers, provision
    from airflow_provider_dispatch.lab.runtime import AsyncLab

    target = kubeconfig_path.resolve()

    async def run() -> None:
        async with AsyncLab(speed=speed, port=port, controllers=() if bare else cluster_controllers()) as running:
            if not bare:
                scenario = await provision(running, ClusterShape(nodes=nodes), runtime=False)
                await scenario.close()
            running.kubeconfig(target)
            click.echo(f"lab API server on {running.url} (lab time x{speed})")
            click.echo(f"kubeconfig: {target}")
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(signum, stop.set)
            await stop.wait()

    asyncio.run(run())


@lab.command("real")
@click.option(
    "--nodes",
    default=2,
    show_default=True,
    type=click.IntRange(min=0),
    help="Nodes to register (node-1, node-2, ...), each with the lab's simulated kubelet.",
)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder for keys, kubeconfigs, data and logs (default: a new temporary folder, removed at the end).",
)
def real(nodes: int, workdir: Path | None) -> None:
    """Run the real control plane (etcd, kube-apiserver, controller manager, scheduler, JobSet, Trainer, Kueue,
    as controlplane/build makes them) with simulated nodes, until interrupted (Ctrl-C)."""
    import logging
    import threading

    from airflow_provider_dispatch.lab.rbac_setup import IDENTITIES
    from airflow_provider_dispatch.lab.real import RealCluster

    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logging.getLogger("airflow_provider_dispatch.lab.real.cluster").setLevel(logging.INFO)  # its start phases
    names = [f"node-{index}" for index in range(1, nodes + 1)]
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    cluster = RealCluster(nodes=names, workdir=workdir, keep_workdir=workdir is not None)
    click.echo("starting the real control plane (the first run on a machine builds it; that takes a while)")
    try:
        cluster.start()
        pinned = ", ".join(f"{key.lower()} {value}" for key, value in cluster.versions.items())
        click.echo(f"real API server on {cluster.url} ({pinned})")
        click.echo(f"logs: {cluster.workdir / 'logs'}")
        for identity in IDENTITIES:
            click.echo(f"kubeconfig ({identity}): {cluster.kubeconfig(identity)}")
        click.echo("Ctrl-C stops it")
        stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        click.echo("stopping the real control plane")
        cluster.stop()


@main.command()
@click.option(
    "--dags-folder",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=None,
    help="The folder with lost_node_drill.py (default: the example DAGs installed with dispatch, or example_dags/ "
    "of the checkout an editable install runs from).",
)
@click.option(
    "--speed",
    type=click.FloatRange(min=1.0, max=50.0),
    default=10.0,
    show_default=True,
    help="How much faster than real time lab time runs (the drill waits about 100 lab seconds).",
)
@click.option(
    "--fence-after-seconds",
    type=click.FloatRange(min=0.0),
    default=30.0,
    show_default=True,
    help="Lab seconds the frozen node stays not Ready before the lab's fencing agent powers it off.",
)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where the Airflow home, the kubeconfigs and the log go (default: a new temporary folder).",
)
def demo(dags_folder: Path | None, speed: float, fence_after_seconds: float, workdir: Path | None) -> None:
    """Run the lost-node drill end to end: real Airflow (`airflow dags test`) against the embedded lab.

    A node freezes under a running TrainJob; the TrainJob is held; dispatch's sensor waits and says why; the
    lab's fencing agent powers the machine off and taints the node out-of-service; the sensor sees the pods
    ceased; the release waits for PodGC and admits the next execution. Prints what happened and the lab's own
    verdict (no two executions ran at once). Exit 0 when the drill ran and the verdict holds, else 1.
    """
    require_lab_extra("dispatch demo")
    from airflow_provider_dispatch.demo import DemoOptions, find_dags_folder, run_demo

    folder = dags_folder or find_dags_folder()
    if folder is None:
        raise click.UsageError("no example DAGs in this installation: pass --dags-folder")
    if not (folder / "lost_node_drill.py").is_file():
        raise click.BadParameter(f"{folder} has no lost_node_drill.py", param_hint="--dags-folder")
    options = DemoOptions(folder.resolve(), speed=speed, fence_after_seconds=fence_after_seconds, workdir=workdir)
    raise click.exceptions.Exit(run_demo(options, click.echo))


# --- the Kueue admission check controller ---------------------------------------------------------------------


def _check_names(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[str, ...]:
    """AdmissionCheck names are DNS subdomains (RFC 1123); anything else is a usage error before anything runs."""
    import re

    subdomain = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
    for value in values:
        if len(value) > 253 or not subdomain.match(value):
            raise click.BadParameter(f"{value!r} is not a valid AdmissionCheck name (a DNS subdomain)", ctx, param)
    return values


@main.command("admission-controller")
@click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Kubeconfig file to use (default: in a Pod its service account, else $KUBECONFIG or ~/.kube/config).",
)
@click.option("--context", default=None, help="Kubeconfig context to use (default: its current context).")
@click.option(
    "--check-name",
    "check_names",
    multiple=True,
    callback=_check_names,
    help="Only this AdmissionCheck (repeatable; each must have controllerName dispatch.phpboyscout.uk/drained). "
    "Default: every AdmissionCheck with that controllerName.",
)
@click.option("--workers", type=click.IntRange(1, 64), default=4, show_default=True, help="Workloads checked at once.")
@click.option(
    "--resync-seconds",
    type=click.FloatRange(min=1.0),
    default=300.0,
    show_default=True,
    help="How often every waiting Workload is checked again, whatever the events said.",
)
@click.option(
    "--shutdown-grace-seconds",
    type=click.FloatRange(min=0.0),
    default=10.0,
    show_default=True,
    help="On SIGTERM, how long the reconciles in hand may take to finish.",
)
@click.option(
    "--settle-seconds",
    type=click.FloatRange(min=0.0, max=3600.0),
    default=DEFAULT_SETTLE_SECONDS,
    show_default=True,
    help="How long a suspension settles before an admission: writes a controller started before it may still "
    "land until then (the API server's request timeout plus the time controllers take to see it).",
)
@click.option(
    "--accept-risk",
    "accepted_risks",
    multiple=True,
    type=click.Choice(RISKS),
    help="Admit TrainJobs whose runtime carries this risk (repeatable): their controllers may start a second "
    "process of one rank; every such admission is logged. Default: refuse them.",
)
@click.option("--log-format", type=click.Choice(["json", "text"]), default="json", show_default=True)
@click.option(
    "--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info", show_default=True
)
def admission_controller(
    kubeconfig: Path | None,
    context: str | None,
    check_names: tuple[str, ...],
    workers: int,
    resync_seconds: float,
    shutdown_grace_seconds: float,
    settle_seconds: float,
    accepted_risks: tuple[str, ...],
    log_format: str,
    log_level: str,
) -> None:
    """Run dispatch's Kueue admission check controller until SIGTERM.

    For each Workload of a dispatch TrainJob with quota reserved and the check Pending, it runs the drain
    check: while pods of the previous execution remain the check stays Pending and names them; when none
    remain it raises the admission number on the TrainJob and sets the check Ready, and Kueue admits it.
    It keeps its AdmissionChecks Active. Logs are JSON lines on stderr. Exit 0 after SIGTERM or SIGINT, 1 when
    the kubeconfig or in-cluster configuration cannot be loaded.
    """
    from airflow_provider_dispatch.kueue.controller import ControllerOptions
    from airflow_provider_dispatch.kueue.logs import configure
    from airflow_provider_dispatch.kueue.runner import run_admission_controller

    configure(log_format, log_level)
    options = ControllerOptions(
        check_names=frozenset(check_names) or None, workers=workers, resync_seconds=resync_seconds
    )
    try:
        asyncio.run(
            run_admission_controller(
                kubeconfig,
                context=context,
                options=options,
                grace_seconds=shutdown_grace_seconds,
                settle_seconds=settle_seconds,
                accepted_risks=frozenset(accepted_risks),
            )
        )
    except DispatchError as error:
        click.echo(f"Error: {error.message}", err=True)
        raise click.exceptions.Exit(1) from None


if __name__ == "__main__":
    main()
