"""`dispatch lab`: serve the lab (`lab serve`) or run the real control plane (`lab real`), until interrupted; the
controls of a served lab (`lab node`, `lab pod`, `lab clock`, `lab verdict`: `cli_controls.py`); and `dispatch demo`
(the lost-node drill, `demo.py`).

The provider's `dispatch` group finds the two commands here, `lab` and `demo`, through this distribution's entry
points (lab/pyproject.toml; the provider's `cli/extras.py` looks them up), so the provider names nothing of the
lab.
Bad options are usage errors (exit 2) before anything starts or is written; a port already in use is one line on
stderr (exit 1). `lab serve` creates no folder: the kubeconfigs go into a folder that must
exist, and it prints every file it writes. With `--tls` the keys live in a temporary folder removed at exit; the
kubeconfigs carry the CA inline.
"""

from __future__ import annotations

import asyncio
import errno
import signal
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from airflow_provider_dispatch.cli.options import workdir_option
from airflow_provider_dispatch_lab.cli_controls import COMMANDS as CONTROL_COMMANDS


@click.group()
def lab() -> None:
    """The local Kubernetes API lab: a loopback API server with a simulated cluster, and its controls."""


def kubeconfig_paths(target: Path, identities: tuple[str, ...]) -> dict[str, Path]:
    """Where each identity's kubeconfig goes: the admin's at `target`, the others beside it
    (`lab-kubeconfig.yaml` -> `lab-kubeconfig-writer.yaml`, ...)."""
    return {
        identity: target if identity == "admin" else target.with_name(f"{target.stem}-{identity}{target.suffix}")
        for identity in identities
    }


def _check_kubeconfig(ctx: click.Context, param: click.Parameter, value: Path) -> Path:
    """The kubeconfig's folder must exist: the lab creates none (a typo must not leave folders behind)."""
    target = value.expanduser().resolve()
    if not target.parent.is_dir():
        raise click.BadParameter(f"folder {target.parent} does not exist (the lab creates no folders)", ctx, param)
    if target.is_dir():
        raise click.BadParameter(f"{target} is a folder, not a file", ctx, param)
    return target


def _nodes_option(default: int, kubelet: str) -> Callable[[Callable[..., None]], Any]:
    """`--nodes` of `lab serve` and `lab real`: how many nodes to register, each with `kubelet` (its help's words)."""
    return click.option(
        "--nodes",
        default=default,
        show_default=True,
        type=click.IntRange(min=0),
        help=f"Nodes to register (node-1, node-2, ...), each with {kubelet}.",
    )


@lab.command("serve")
@click.option(
    "--port", default=0, show_default=True, type=click.IntRange(0, 65535), help="Loopback port; 0 picks a free one."
)
@click.option(
    "--speed",
    default=100.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="How much faster than real time lab time runs (more than 0).",
)
@click.option(
    "--kubeconfig",
    "kubeconfig_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("lab-kubeconfig.yaml"),
    show_default="lab-kubeconfig.yaml",
    callback=_check_kubeconfig,
    help="Where to write the kubeconfig that reaches the lab (its folder must exist). With --rbac, each identity's "
    "goes beside it: NAME-writer.yaml, NAME-reader.yaml, ...",
)
@_nodes_option(3, "its simulated kubelet")
@click.option(
    "--bare",
    is_flag=True,
    help="Serve the API only: no simulated controllers (Trainer, JobSet, Job, kubelets, Kueue ...) and no nodes.",
)
@click.option(
    "--tls",
    is_flag=True,
    help="Serve https with a CA made at start (written into the kubeconfigs): kubectl sends tokens only over TLS.",
)
@click.option(
    "--rbac",
    is_flag=True,
    help="Authenticate bearer tokens and enforce dispatch's RBAC; write a kubeconfig for each identity "
    "(admin, writer, reader, no-nodes, controller).",
)
def serve(port: int, speed: float, kubeconfig_path: Path, nodes: int, bare: bool, tls: bool, rbac: bool) -> None:
    """Serve the lab, with its simulated cluster, until interrupted."""
    from airflow_provider_dispatch_lab.apiserver.auth.rbac_setup import IDENTITIES
    from airflow_provider_dispatch_lab.runtime import AsyncLab
    from airflow_provider_dispatch_lab.scenario.presets import ClusterShape, cluster_controllers, provision
    from airflow_provider_dispatch_lab.scenario.served import LabControls

    paths = kubeconfig_paths(kubeconfig_path, IDENTITIES if rbac else ("admin",))

    async def run(tls_dir: Path | None) -> None:
        controls = LabControls()
        served = AsyncLab(
            speed=speed,
            port=port,
            controllers=() if bare else cluster_controllers(),
            rbac=rbac,
            tls_dir=tls_dir,
            middlewares=(controls.middleware,),
        )
        try:
            await served.start()
        except OSError as error:
            reason = "address already in use" if error.errno == errno.EADDRINUSE else (error.strerror or str(error))
            raise click.ClickException(f"cannot listen on 127.0.0.1:{port}: {reason}") from None
        controls.bind(served)
        try:
            if not bare:
                scenario = await provision(served, ClusterShape(nodes=nodes), runtime=False)
                await scenario.close()
            for identity, path in paths.items():
                if rbac:
                    served.kubeconfig_for(identity, path)
                else:
                    served.kubeconfig(path)
            extras = "".join(", " + flag for flag, on in (("TLS", tls), ("RBAC", rbac)) if on)
            click.echo(f"lab API server on {served.url} (lab time x{speed}{extras})")
            for identity, path in paths.items():
                click.echo(f"kubeconfig: {path}" if identity == "admin" else f"kubeconfig ({identity}): {path}")
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(signum, stop.set)
            await stop.wait()
        finally:
            await controls.close()
            await served.stop()

    if not tls:
        asyncio.run(run(None))
        return
    with tempfile.TemporaryDirectory(prefix="dispatch-lab-tls-") as keys:
        asyncio.run(run(Path(keys)))


@lab.command("real")
@_nodes_option(2, "a hollow kubelet (the real kubelet, on simulated processes)")
@workdir_option("Folder for keys, kubeconfigs, data and logs (default: a new temporary folder, removed at the end).")
def real(nodes: int, workdir: Path | None) -> None:
    """Run the real control plane (etcd, kube-apiserver, controller manager, scheduler, JobSet, Trainer, Kueue,
    as controlplane/build makes them) with hollow nodes, until interrupted (Ctrl-C)."""
    import logging
    import threading

    from airflow_provider_dispatch_lab.apiserver.auth.rbac_setup import IDENTITIES
    from airflow_provider_dispatch_lab.real import RealCluster

    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logging.getLogger("airflow_provider_dispatch_lab.real.cluster").setLevel(logging.INFO)  # its start phases
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


for _control in CONTROL_COMMANDS:
    lab.add_command(_control)


# --- `dispatch demo` ------------------------------------------------------------------------------------------


@click.command()
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
@workdir_option("Where the Airflow home, the kubeconfigs and the log go (default: a new temporary folder).")
def demo(dags_folder: Path | None, speed: float, fence_after_seconds: float, workdir: Path | None) -> None:
    """Run the lost-node drill end to end: real Airflow (`airflow dags test`) against the embedded lab.

    A node freezes under a running TrainJob; the TrainJob is held; dispatch's sensor waits and says why; the
    lab's fencing agent powers the machine off and taints the node out-of-service; the sensor sees the pods
    ceased; the release waits for PodGC and admits the next execution. Prints what happened and the lab's own
    verdict (no two executions ran at once). Exit 0 when the drill ran and the verdict holds, else 1.
    """
    # imported when run: `dispatch --help` loads this module (the entry points) and needs none of the drill
    from airflow_provider_dispatch_lab.demo import DemoOptions, find_dags_folder, run_demo

    folder = dags_folder or find_dags_folder()
    if folder is None:
        raise click.UsageError("no example DAGs in this installation: pass --dags-folder")
    if not (folder / "lost_node_drill.py").is_file():
        raise click.BadParameter(f"{folder} has no lost_node_drill.py", param_hint="--dags-folder")
    options = DemoOptions(folder.resolve(), speed=speed, fence_after_seconds=fence_after_seconds, workdir=workdir)
    raise click.exceptions.Exit(run_demo(options, click.echo))
