"""The `dispatch` command: run the lab, and (in later commands) status, find and the admission controller.

Kept free of Airflow imports so that `dispatch lab` starts in a fraction of the time `airflow` takes.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import click

from airflow_provider_dispatch import __version__


@click.group()
@click.version_option(__version__, prog_name="dispatch")
def main() -> None:
    """Restart Kubeflow Trainer TrainJobs without ever running two executions at once."""


@main.group()
def lab() -> None:
    """The local Kubernetes API lab: a loopback API server with a simulated cluster."""


@lab.command("serve")
@click.option("--port", default=0, show_default=True, help="Loopback port; 0 picks a free one.")
@click.option("--speed", default=100.0, show_default=True, help="How much faster than real time lab time runs.")
@click.option(
    "--kubeconfig",
    "kubeconfig_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("lab-kubeconfig.yaml"),
    show_default=True,
    help="Where to write the kubeconfig that reaches the lab.",
)
def serve(port: int, speed: float, kubeconfig_path: Path) -> None:
    """Serve the lab until interrupted."""
    from airflow_provider_dispatch.lab.runtime import AsyncLab

    target = kubeconfig_path.resolve()

    async def run() -> None:
        async with AsyncLab(speed=speed, port=port) as running:
            running.kubeconfig(target)
            click.echo(f"lab API server on {running.url} (lab time x{speed})")
            click.echo(f"kubeconfig: {target}")
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(signum, stop.set)
            await stop.wait()

    asyncio.run(run())


@main.command()
def demo() -> None:
    """Start the lab, and talk to it through the official client as a cluster (the smoke run)."""
    import kubernetes

    from airflow_provider_dispatch.lab import manifests
    from airflow_provider_dispatch.lab.runtime import Lab

    with Lab(speed=100.0) as running:
        client = kubernetes.config.new_client_from_config(config_file=str(running.kubeconfig()))
        custom = kubernetes.client.CustomObjectsApi(client)
        group, version = "trainer.kubeflow.org", "v1alpha1"
        custom.create_cluster_custom_object(
            group, version, "clustertrainingruntimes", manifests.cluster_training_runtime()
        )
        created = custom.create_namespaced_custom_object(
            group, version, "default", "trainjobs", manifests.trainjob("demo-train")
        )
        click.echo(f"lab API server on {running.url}")
        click.echo(
            f"created TrainJob default/{created['metadata']['name']} (uid {created['metadata']['uid']}, "
            f"resourceVersion {created['metadata']['resourceVersion']}, suspend={created['spec']['suspend']})"
        )
        client.close()


if __name__ == "__main__":
    main()
