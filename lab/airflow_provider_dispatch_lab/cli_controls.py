"""`dispatch lab node|pod|clock|verdict`: rehearse a failure against a served lab, and ask it for its verdict.

The lab's scenario controls (`lab/scenario/scenario.py`) as commands, for a person or a script driving a lab that
`dispatch lab serve` runs in another terminal. Each command sends one request to the lab's control paths
(`lab/scenario/served.py`: `/lab/nodes/...`, `/lab/pods/...`, `/lab/clock...`, `/lab/verdict`) with the
official Kubernetes client and the lab's kubeconfig, as kubectl reaches a cluster: `--kubeconfig` (default
`$KUBECONFIG`, else `~/.kube/config`), `--context`, `--request-timeout`. The lab answers once it has carried the
control out (a frozen node's kubelet has stopped, lab time has moved), so a script can run the next step at once.

Only the lab's admin may use the controls (its kubeconfig, the one `dispatch lab serve` writes first). A server
that is not a lab answers 404 for those paths, which is said in those words. Exit codes: 0 done; 1 refused (no
such node, a machine that cannot act, not the admin, not a lab); 2 usage; 3 no answer (retry). `verdict` exits
0 when the promise held for every TrainJob it reports, 1 when it was broken, 3 when it could not be read.

Registered under `dispatch lab` by `cli.py`. What it sends and reads is JSON, over HTTP; of the rest of the lab
it imports only the verdict's text (`truth.verdict`, when it prints one), so a client may drive a lab served from
another environment or machine.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, NoReturn

import click

from airflow_provider_dispatch.cli.options import Timeout, checked
from airflow_provider_dispatch.cli.status_view import EXIT_REFUSED, EXIT_UNREACHABLE, table
from airflow_provider_dispatch.dispatch.errors import InvalidNameError
from airflow_provider_dispatch.dispatch.validation import (
    parse_ref,
    validate_namespace,
    validate_node_name,
    validate_trainjob_name,
)

Obj = dict[str, Any]
#: `verdict`'s exit code when the promise was broken (any overlap)
EXIT_BROKEN: Final = 1
#: the machine states, by the command that puts a node's machine in it (`lab/simulated/nodes/kubelet.py`)
NODE_STATES: Final = {
    "freeze": "frozen",
    "lose": "lost",
    "not-ready": "not-ready",
    "power-off": "powered-off",
    "restore": "ready",
}
_GENERIC_NOT_FOUND: Final = "the server could not find the requested resource"


@dataclass(frozen=True)
class LabConnection:
    kubeconfig: Path | None
    context: str | None
    request_timeout: float | None


class ControlError(Exception):
    """A control the lab did not carry out; `code` is the command's exit code."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def connection_options(command: Callable[..., None]) -> Any:
    """`--kubeconfig`, `--context`, `--request-timeout` (kubectl's names), given to the command as `lab`."""

    @functools.wraps(command)
    def with_connection(
        *, kubeconfig: Path | None, context: str | None, request_timeout: float | None, **arguments: Any
    ) -> None:
        command(lab=LabConnection(kubeconfig, context, request_timeout), **arguments)

    wrapped: Any = with_connection
    for option in reversed(
        [
            click.option(
                "--kubeconfig",
                type=click.Path(dir_okay=False, path_type=Path),
                default=None,
                help="The lab's kubeconfig, as `dispatch lab serve` wrote it (default: $KUBECONFIG, else "
                "~/.kube/config).",
            ),
            click.option("--context", default=None, help="Kubeconfig context to use (default: its current one)."),
            click.option(
                "--request-timeout",
                type=Timeout(),
                default=None,
                help="How long to wait for the lab to answer, as kubectl reads it (default: 60 s; advancing the "
                "clock far takes longer: the default then grows with the lab seconds).",
            ),
        ]
    ):
        wrapped = option(wrapped)
    return wrapped


def _fail(error: ControlError) -> NoReturn:
    click.echo(f"Error: {error.message}", err=True)
    raise click.exceptions.Exit(error.code)


def call(lab: LabConnection, method: str, path: str, body: Obj | None = None, *, wait: float = 60.0) -> Obj:
    """One request to the lab's control path `path`, as the kubeconfig's user; the decoded answer."""
    import kubernetes
    from kubernetes.client.exceptions import ApiException

    try:
        client = kubernetes.config.new_client_from_config(
            config_file=None if lab.kubeconfig is None else str(lab.kubeconfig), context=lab.context
        )
    except Exception as error:  # the kubernetes client raises several types for a bad kubeconfig
        raise ControlError(f"cannot load the kubeconfig: {error}", EXIT_REFUSED) from None
    host = client.configuration.host
    timeout = lab.request_timeout if lab.request_timeout is not None else wait
    try:
        response = client.call_api(
            path,
            method,
            body=body,
            header_params={"Accept": "application/json", "Content-Type": "application/json"},
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=(min(timeout, 10.0), timeout),
        )
        answer = json.loads(response.data or b"null")
    except ApiException as error:
        raise _refusal(error, host, path) from None
    except ValueError:
        answer = None
    except Exception as error:  # urllib3's connection errors and timeouts
        raise ControlError(f"the lab at {host} did not answer {method} {path}: {error}", EXIT_UNREACHABLE) from None
    finally:
        client.close()
    if not isinstance(answer, dict):
        raise ControlError(f"{host} answered {method} {path} with something that is not a JSON object", EXIT_REFUSED)
    return answer


def send(lab: LabConnection, method: str, path: str, body: Obj | None = None, *, wait: float = 60.0) -> Obj:
    """`call`, ending the command with the error's line and exit code when the lab did not carry it out."""
    try:
        return call(lab, method, path, body, wait=wait)
    except ControlError as error:
        _fail(error)


def _refusal(error: Any, host: str, path: str) -> ControlError:
    try:
        status = json.loads(error.body or "")
    except (TypeError, ValueError):
        status = {}
    message = str(status.get("message") or error.reason or "") if isinstance(status, dict) else str(error.reason)
    if error.status == 404 and message == _GENERIC_NOT_FOUND and not (status or {}).get("details"):
        return ControlError(
            f"{host} serves no lab controls ({path} is not found there): is it `dispatch lab serve`?", EXIT_REFUSED
        )
    code = EXIT_UNREACHABLE if error.status in (429, 500, 502, 503, 504) or error.status == 0 else EXIT_REFUSED
    return ControlError(f"the lab refused ({error.status}): {message}", code)


def _checked_node(ctx: click.Context, param: click.Parameter, value: str) -> str:
    return checked(validate_node_name)(ctx, param, value) or value


def _pod_ref(ctx: click.Context, param: click.Parameter, value: str) -> tuple[str, str]:
    namespace, slash, name = value.partition("/")
    try:
        if not slash:
            raise InvalidNameError(f"{value!r} is not NAMESPACE/POD")
        validate_namespace(namespace)
        validate_node_name(name)  # a pod's name is a DNS subdomain, as a node's is
    except InvalidNameError as error:
        raise click.BadParameter(error.message, ctx=ctx, param=param) from None
    return namespace, name


def _describe_node(node: Mapping[str, Any]) -> str:
    ready = node.get("ready") or "absent"
    fencing = node.get("fenceAfterSeconds")
    armed = "" if fencing is None else f"; fencing armed after {fencing} lab s"
    fenced = "; fenced by the lab's fencing agent" if node.get("fenced") else ""
    return f"node/{node.get('name')}: machine {node.get('machine') or 'none'}; Node Ready={ready}{armed}{fenced}"


# -------------------------------------------------------------------------------------------------- node


@click.group()
def node() -> None:
    """A node's machine: freeze, lose, set not ready, power off, restore; arm the fencing agent; list the nodes.

    Each state is what the node's simulated kubelet and machine then do (docs/lab.md, "Node states"):
    freeze (no heartbeat, processes paused), lose (partitioned: processes run on, the API hears nothing),
    not-ready (heartbeats with Ready=False), power-off (processes stop, nothing tells the API), restore
    (Ready again; a powered-off machine reboots with its processes gone).
    """


def _state_command(verb: str, state: str) -> click.Command:
    @node.command(verb, help=f"Put NODE's machine in the lab state `{state}` and wait until its kubelet has.")
    @click.argument("name", metavar="NODE", callback=_checked_node)
    @connection_options
    def command(name: str, lab: LabConnection) -> None:
        answer = send(lab, "POST", f"/lab/nodes/{name}/state", {"state": state})
        click.echo(_describe_node(answer))

    return command


for _verb, _state in NODE_STATES.items():
    _state_command(_verb, _state)


@node.command("fencing")
@click.argument("name", metavar="NODE", callback=_checked_node)
@click.option(
    "--after",
    "after_seconds",
    type=click.FloatRange(min=0),
    default=None,
    help="Lab seconds NODE must stay not Ready before the fencing agent powers its machine off and taints it "
    "out-of-service.",
)
@click.option("--off", is_flag=True, help="Disarm the fencing agent for NODE.")
@connection_options
def fencing(name: str, after_seconds: float | None, off: bool, lab: LabConnection) -> None:
    """Arm (--after SECONDS) or disarm (--off) the lab's fencing agent for NODE (its Node annotation
    lab.dispatch.phpboyscout.uk/fence-after-seconds)."""
    if off == (after_seconds is not None):
        raise click.UsageError("give exactly one of --after SECONDS and --off")
    answer = send(lab, "POST", f"/lab/nodes/{name}/fencing", {"afterSeconds": after_seconds})
    click.echo(_describe_node(answer))


@node.command("list")
@click.option("--output", "-o", type=click.Choice(["text", "json"]), default="text", show_default=True)
@connection_options
def node_list(output: str, lab: LabConnection) -> None:
    """Every node: its machine's lab state, its Ready condition, its taints and the fencing agent's setting."""
    answer = send(lab, "GET", "/lab/nodes")
    items = answer.get("items") or []
    if output == "json":
        click.echo(json.dumps(answer, indent=2))
        return
    header = ("NAME", "MACHINE", "READY", "FENCE AFTER", "FENCED", "TAINTS")
    rows = [
        (
            str(n.get("name")),
            str(n.get("machine") or "<none>"),
            str(n.get("ready") or "<none>"),
            "<none>" if n.get("fenceAfterSeconds") is None else f"{n['fenceAfterSeconds']}s",
            "yes" if n.get("fenced") else "no",
            ",".join(n.get("taints") or []) or "<none>",
        )
        for n in items
    ]
    click.echo("\n".join(table(header, rows)))


# --------------------------------------------------------------------------------------------------- pod


@click.group()
def pod() -> None:
    """A pod's simulated process: make it exit now, or change how long it takes to stop after SIGTERM."""


@pod.command("exit")
@click.argument("ref", metavar="NAMESPACE/POD", callback=_pod_ref)
@click.option("--code", type=click.IntRange(0, 255), default=0, show_default=True, help="The exit code.")
@connection_options
def pod_exit(ref: tuple[str, str], code: int, lab: LabConnection) -> None:
    """The pod's running process exits now with CODE, on its machine, whether or not the kubelet can tell the API
    (a lost node's process exits; a frozen or powered-off one cannot: refused)."""
    namespace, name = ref
    send(lab, "POST", f"/lab/pods/{namespace}/{name}/exit", {"code": code})
    click.echo(f"pod/{name} in {namespace}: its process exited with code {code}")


@pod.command("termination-seconds")
@click.argument("ref", metavar="NAMESPACE/POD", callback=_pod_ref)
@click.argument("seconds", type=click.FloatRange(min=0))
@connection_options
def pod_termination(ref: tuple[str, str], seconds: float, lab: LabConnection) -> None:
    """How many lab seconds the pod's process takes to stop after SIGTERM: its running process, and the
    annotation lab.dispatch.phpboyscout.uk/termination-seconds for the processes after it."""
    namespace, name = ref
    send(lab, "POST", f"/lab/pods/{namespace}/{name}/termination-seconds", {"seconds": seconds})
    click.echo(f"pod/{name} in {namespace}: stops {seconds:g} lab seconds after SIGTERM")


# ------------------------------------------------------------------------------------------------- clock


@click.group()
def clock() -> None:
    """Lab time: show it, move it forward, change its speed."""


def _show_clock(answer: Mapping[str, Any]) -> None:
    click.echo(f"lab time {answer.get('now')} (x{float(answer.get('speed') or 0):g})")


@clock.command("show")
@connection_options
def clock_show(lab: LabConnection) -> None:
    """Print lab time and its speed."""
    _show_clock(send(lab, "GET", "/lab/clock"))


@clock.command("advance")
@click.argument("seconds", type=click.FloatRange(min=0))
@connection_options
def clock_advance(seconds: float, lab: LabConnection) -> None:
    """Move lab time forward by SECONDS, in steps of the kubelets' lease renewal (10 s): the healthy kubelets
    heartbeat at each step, so only silent nodes (frozen, lost, powered off) age toward Unknown."""
    _show_clock(send(lab, "POST", "/lab/clock/advance", {"seconds": seconds}, wait=max(130.0, seconds / 10 + 10)))


@clock.command("speed")
@click.argument("speed", type=click.FloatRange(min=0))
@connection_options
def clock_speed(speed: float, lab: LabConnection) -> None:
    """Run lab time SPEED times faster than real time from now on (0 stops it: only `advance` moves it)."""
    _show_clock(send(lab, "POST", "/lab/clock/speed", {"speed": speed}))


# ----------------------------------------------------------------------------------------------- verdict


def _trainjob(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    try:
        if value is not None:
            parse_ref(value) if "/" in value else validate_trainjob_name(value)
    except InvalidNameError as error:
        raise click.BadParameter(error.message, ctx=ctx, param=param) from None
    return value


@click.command()
@click.argument("ref", metavar="[[NAMESPACE/]NAME]", required=False, callback=_trainjob)
@click.option(
    "--namespace",
    "-n",
    default=None,
    callback=checked(validate_namespace),
    help="The TrainJob's namespace; without NAME, report every TrainJob of this namespace.",
)
@click.option("--output", "-o", type=click.Choice(["text", "json"]), default="text", show_default=True)
@connection_options
def verdict(ref: str | None, namespace: str | None, output: str, lab: LabConnection) -> None:
    """The lab's verdict: the admissions of each TrainJob, the processes each execution ran, and any overlap of
    two executions, of one rank or of two restart attempts (from the overlap recorder, which nothing a client
    does can change). Without NAME, every TrainJob the lab saw admitted or running. Exit 0 when the promise held,
    1 when it was broken, 3 when the verdict could not be read."""
    query: dict[str, str] = {}
    if ref is not None:
        in_ref, _, name = ref.rpartition("/")
        if in_ref and namespace and in_ref != namespace:
            raise click.UsageError(f"the namespace {in_ref!r} in the argument differs from --namespace {namespace!r}")
        query = {"namespace": in_ref or namespace or "default", "name": name}
    elif namespace:
        query = {"namespace": namespace}
    path = "/lab/verdict" + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")
    try:
        answer = call(lab, "GET", path)
    except ControlError as error:
        click.echo(f"Error: {error.message}", err=True)
        raise click.exceptions.Exit(EXIT_UNREACHABLE) from None
    kept = bool(answer.get("promiseKept"))
    if output == "json":
        click.echo(json.dumps(answer, indent=2))
    else:
        from airflow_provider_dispatch_lab.truth.verdict import TrainJobVerdict

        items = [TrainJobVerdict.from_json(item) for item in answer.get("items") or []]
        lines = [line for item in items for line in item.lines()]
        click.echo("\n".join(lines) if lines else "The lab saw no TrainJob admitted or running.")
        click.echo("The promise held: one execution at a time." if kept else "The promise was BROKEN.")
    if not kept:
        raise click.exceptions.Exit(EXIT_BROKEN)


COMMANDS: Final = (node, pod, clock, verdict)
"""What `cli.py` adds to `dispatch lab`."""

__all__ = ["COMMANDS", "EXIT_BROKEN", "NODE_STATES", "LabConnection", "call"]
