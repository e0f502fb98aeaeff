"""The `dispatch` command: status, find and list for a person or a script; the lab's commands when it is installed.

Kept free of Airflow imports so that `dispatch status` and `dispatch lab` start in a fraction of the time
`airflow` takes; the Kubernetes client is imported only by the commands that talk to a cluster.

`dispatch status`, `find` and `list` write nothing: they run on a read-only adapter, which refuses any write
before it is sent (dispatch/sync_adapter.py). Their arguments are validated before the kubeconfig is even
read, so a name such as `a,b` is a usage error (exit 2) and never becomes a request. Their options are kubectl's
(options.py); how they run and print, once or with --watch, is report.py's. Exit codes are
`status_view.EXIT_*`: 0 the status was printed; 1 refused (not found, not managed by dispatch, forbidden, an
unloadable kubeconfig, a listed TrainJob that could not be assessed); 2 usage; 3 unreachable or a failed call
worth retrying; 130 interrupted by Ctrl-C before the answer (`DispatchGroup`).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import click
import yaml

from airflow_provider_dispatch import __version__
from airflow_provider_dispatch.cli.extras import LAB_COMMANDS, lab_command, lab_command_names, missing_lab_command
from airflow_provider_dispatch.cli.options import (
    ClusterOptions,
    OutputCommand,
    checked,
    cluster_options,
    resolve_namespace,
    trainjob_argument,
)
from airflow_provider_dispatch.cli.report import list_shown, report, status_shown, with_created
from airflow_provider_dispatch.cli.status_view import EXIT_INTERRUPTED
from airflow_provider_dispatch.dispatch.errors import DispatchError
from airflow_provider_dispatch.dispatch.evidence import DEFAULT_SETTLE_SECONDS
from airflow_provider_dispatch.dispatch.nodes import DEFAULT_CLOCK_SKEW_SECONDS
from airflow_provider_dispatch.dispatch.policy import RISKS
from airflow_provider_dispatch.dispatch.validation import Ref, validate_job_id, validate_namespace


class DispatchGroup(click.Group):
    """The command group: Ctrl-C ends a command as a shell expects of an interrupted program, exit 130 and no
    message. click's own handling prints "Aborted!" and exits 1, which here means a refusal (docs/cli.rst). The
    watch and the admission controller handle SIGINT themselves and exit 0.

    The lab's commands (`dispatch lab`, `dispatch demo`) are not here: the lab distribution offers them, and the
    group looks one up by name only when asked for it or for the list (`extras.lab_command`, the one seam). Asked
    for one without the lab installed, it says what to install and exits `EXIT_MISSING_EXTRA`."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *lab_command_names()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return super().get_command(ctx, cmd_name) or lab_command(cmd_name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        if args and args[0] in LAB_COMMANDS and self.get_command(ctx, args[0]) is None:
            # `dispatch lab serve`: the subcommand too, when one is given, so the line names what was asked
            subcommand = args[1:2] if args[1:2] and not args[1].startswith("-") else []
            raise missing_lab_command([args[0], *subcommand])
        return super().resolve_command(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise click.exceptions.Exit(EXIT_INTERRUPTED) from None


@click.group(cls=DispatchGroup)
@click.version_option(__version__, prog_name="dispatch")
def main() -> None:
    """Restart Kubeflow Trainer TrainJobs without ever running two executions at once."""


# --- status, find and list -----------------------------------------------------------------------------------


@main.command(cls=OutputCommand)
@click.argument("ref", metavar="[NAMESPACE/]NAME", callback=checked(trainjob_argument))
@cluster_options(watch=True)
def status(ref: str, namespace: str | None, options: ClusterOptions) -> None:
    """Show the state of one TrainJob: its execution, and what keeps it from running.

    While pods of the previous execution remain, it lists each with its node's state and says what would
    unblock it. It writes nothing.
    """
    in_argument, _, name = ref.rpartition("/")
    target = Ref(resolve_namespace(namespace, in_argument or None, options), name)
    report(
        lambda adapter, now: with_created(adapter.inspect(target, now=now), adapter),
        status_shown(options.output),
        options,
    )


@main.command(cls=OutputCommand)
@click.argument("namespace_argument", metavar="[NAMESPACE]", required=False, callback=checked(validate_namespace))
@click.option("--job-id", required=True, callback=checked(validate_job_id), help="The dispatch job id to find.")
@cluster_options(watch=True)
def find(namespace_argument: str | None, job_id: str, namespace: str | None, options: ClusterOptions) -> None:
    """Show the newest TrainJob of a job id (its current submission), as `status` does.

    The namespace is the argument, or -n, or the kubeconfig context's. It writes nothing.
    """
    where = resolve_namespace(namespace, namespace_argument, options)
    report(
        lambda adapter, now: with_created(adapter.find(where, job_id, now=now), adapter),
        status_shown(options.output),
        options,
    )


@main.command("list", cls=OutputCommand)
@cluster_options(watch=True, all_namespaces=True)
def list_command(namespace: str | None, all_namespaces: bool, options: ClusterOptions) -> None:
    """List the TrainJobs dispatch manages: state, execution, age, and what blocks each.

    Each TrainJob that carries dispatch's job-id label is assessed as `status` assesses it. One that cannot be
    (its labels are not dispatch's) is reported on standard error, or under "errors" in json and yaml, and the
    exit code is then 1. It writes nothing.
    """
    scope = None if all_namespaces else resolve_namespace(namespace, None, options)
    report(
        lambda adapter, now: adapter.list_managed(scope, now=now),
        list_shown(options.output, all_namespaces, scope),
        options,
    )


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
    "--clock-skew-seconds",
    type=click.FloatRange(min=0.0, max=3600.0),
    default=DEFAULT_CLOCK_SKEW_SECONDS,
    show_default=True,
    help="The bound assumed on how far the clocks of two API server replicas differ: every wait that compares two "
    "times the API server wrote (the settle, a deleted node's) waits this much longer.",
)
@click.option(
    "--require-pod-fence/--no-require-pod-fence",
    default=False,
    show_default=True,
    help="Refuse an admission unless dispatch's pod fence was in force, unchanged, for the whole execution it "
    "ends (`dispatch pod-fence`); without it the record of that execution's pods alone protects the admission.",
)
@click.option(
    "--accept-risk",
    "accepted_risks",
    multiple=True,
    type=click.Choice(RISKS),
    help="Admit TrainJobs whose runtime carries this risk (repeatable): their controllers may start a second "
    "process of one rank; every such admission is logged. Default: refuse them.",
)
@click.option(
    "--leader-elect/--no-leader-elect",
    default=False,
    show_default=True,
    help="Run as one candidate of several replicas: only the holder of a coordination.k8s.io Lease works and "
    "writes; the others wait to take over (docs/kueue.md, 'High availability').",
)
@click.option(
    "--leader-election-namespace",
    default=None,
    help="The Lease's namespace (default: the Pod's, from $POD_NAMESPACE or its service account; else "
    "dispatch-system).",
)
@click.option(
    "--leader-election-id",
    default="dispatch-admission-controller",
    show_default=True,
    help="The Lease's name.",
)
@click.option(
    "--lease-duration-seconds",
    type=click.FloatRange(min=1.0),
    default=15.0,
    show_default=True,
    help="How long a standby waits, after it last saw the Lease renewed, before it takes it over.",
)
@click.option(
    "--renew-deadline-seconds",
    type=click.FloatRange(min=0.1),
    default=10.0,
    show_default=True,
    help="How long the leader keeps trying to renew before it stops leading (less than the lease duration).",
)
@click.option(
    "--retry-period-seconds",
    type=click.FloatRange(min=0.1),
    default=2.0,
    show_default=True,
    help="How often the leader renews and a standby tries to acquire.",
)
@click.option(
    "--http-bind-address",
    default=None,
    metavar="[HOST]:PORT",
    help="Serve /healthz, /readyz and /metrics (Prometheus) there, e.g. :8080 (needs the controller extra). "
    "Default: no HTTP server.",
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
    clock_skew_seconds: float,
    require_pod_fence: bool,
    accepted_risks: tuple[str, ...],
    leader_elect: bool,
    leader_election_namespace: str | None,
    leader_election_id: str,
    lease_duration_seconds: float,
    renew_deadline_seconds: float,
    retry_period_seconds: float,
    http_bind_address: str | None,
    log_format: str,
    log_level: str,
) -> None:
    """Run dispatch's Kueue admission check controller until SIGTERM.

    For each Workload of a dispatch TrainJob with quota reserved and the check Pending, it runs the drain
    check: while pods of the previous execution remain the check stays Pending and names them; when none
    remain it raises the admission number on the TrainJob and sets the check Ready, and Kueue admits it.
    It keeps its AdmissionChecks Active. With --leader-elect, several replicas run and one works. Logs are JSON
    lines on stderr. Exit 0 after SIGTERM or SIGINT, 1 when the kubeconfig or in-cluster configuration cannot be
    loaded, 4 when --http-bind-address is given without the controller extra.
    """
    from airflow_provider_dispatch.cli.extras import EXIT_MISSING_EXTRA
    from airflow_provider_dispatch.kueue.controller import ControllerOptions
    from airflow_provider_dispatch.kueue.endpoints import (
        CONTROLLER_EXTRA_INSTALL,
        metrics_available,
        parse_bind_address,
    )
    from airflow_provider_dispatch.kueue.leader import ElectionConfig, default_identity
    from airflow_provider_dispatch.kueue.logs import configure
    from airflow_provider_dispatch.kueue.runner import POD_NAME_ENV, election_namespace, run_admission_controller

    http_address = None
    if http_bind_address is not None:
        try:
            http_address = parse_bind_address(http_bind_address)
        except ValueError as error:
            raise click.BadParameter(str(error), param_hint="--http-bind-address") from None
        if not metrics_available():
            click.echo(
                "dispatch admission-controller --http-bind-address serves /metrics, which needs the controller "
                f"extra (missing: prometheus-client): {CONTROLLER_EXTRA_INSTALL}",
                err=True,
            )
            raise click.exceptions.Exit(EXIT_MISSING_EXTRA)
    election = None
    if leader_elect:
        try:
            election = ElectionConfig(
                namespace=election_namespace(leader_election_namespace),
                identity=default_identity(os.environ.get(POD_NAME_ENV)),
                name=leader_election_id,
                lease_duration=lease_duration_seconds,
                renew_deadline=renew_deadline_seconds,
                retry_period=retry_period_seconds,
            )
        except ValueError as error:
            raise click.UsageError(f"leader election: {error}") from None
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
                election=election,
                http_address=http_address,
                settle_seconds=settle_seconds,
                clock_skew_seconds=clock_skew_seconds,
                require_pod_fence=require_pod_fence,
                accepted_risks=frozenset(accepted_risks),
            )
        )
    except DispatchError as error:
        click.echo(f"Error: {error.message}", err=True)
        raise click.exceptions.Exit(1) from None


@main.command("pod-fence")
def pod_fence() -> None:
    """Print dispatch's pod fence: the ValidatingAdmissionPolicy and its binding, as YAML to apply once.

    `dispatch pod-fence | kubectl apply -f -` (a cluster administrator: both objects are cluster-scoped). With it
    the API server refuses to force-delete a pod of a dispatch TrainJob that may still run, to evict any pod with
    a grace period of 0, and to change the labels that say which TrainJob and execution a pod belongs to while
    it runs; dispatch verifies it at every admission (docs/runbook.md). It contacts no cluster.
    """
    from airflow_provider_dispatch.dispatch.fence import manifests

    click.echo(yaml.safe_dump_all(manifests(), sort_keys=False, width=120), nl=False)


if __name__ == "__main__":
    main()
