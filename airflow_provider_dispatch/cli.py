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


if __name__ == "__main__":
    main()
