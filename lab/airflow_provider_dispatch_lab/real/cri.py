"""The CRI server of one hollow machine: the RuntimeService and ImageService the hollow kubelet calls.

A gRPC server on the machine's unix socket (the kubelet's `--container-runtime-endpoint`), on the machines' event
loop, answering from the machine's `ContainerRuntime` (`containers.py`). It serves what kubelet v1.36 calls on a
node without streaming lists (`CRIListStreaming` off, its default) or evented PLEG (`EventedPLEG` off):
`Version`, `Status`, `RuntimeConfig`, the sandbox and container lifecycles and lists, `ContainerStatus`,
the stats lists (empty figures: a hollow machine uses no CPU or memory of its own), and the images (pulled at
once, kept by name). Every other call answers `UNIMPLEMENTED`, as the generated servicer bases do, and the kubelet
takes that as it takes it from any runtime that lacks the call.

The answers follow containerd's CRI plugin where the kubelet reads them: API version `v1`, `version` 0.1.0 (the
only one `kuberuntime_manager.go` accepts), `NetworkReady=false` with reason `NetworkPluginNotReady` while the
machine's network is down (the kubelet then reports the Node `Ready=False`, `KubeletNotReady`), exit reasons
`Completed` and `Error`, and a sandbox IP for every pod that is not on the host's network (the kubelet makes a new
sandbox for one without).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import grpc

from airflow_provider_dispatch_lab.real.containers import (
    Container,
    ContainerRuntime,
    CriError,
    Sandbox,
    image_id,
)
from airflow_provider_dispatch_lab.real.cri_stubs import CriStubs

T = TypeVar("T")
logger = logging.getLogger(__name__)

RUNTIME_NAME = "dispatch-lab"
"""The runtime's name: container IDs read `dispatch-lab://<id>` in pod status."""
RUNTIME_VERSION = "0.1.0"
NETWORK_NOT_READY_REASON = "NetworkPluginNotReady"
NETWORK_NOT_READY_MESSAGE = "Network plugin returns error: cni plugin not initialized"


def _ns(seconds: float | None) -> int:
    return 0 if seconds is None else int(seconds * 1_000_000_000)


def _matches(labels: dict[str, str], selector: Any) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


class Cri:
    """The two services over one `ContainerRuntime`; `serve()` starts the gRPC server on `socket`."""

    def __init__(self, runtime: ContainerRuntime, stubs: CriStubs, socket: Path) -> None:
        self.runtime = runtime
        self.stubs = stubs
        self.socket = socket
        self.server: Any = None

    async def serve(self) -> None:
        self.socket.unlink(missing_ok=True)
        server = grpc.aio.server()
        self.stubs.services.add_RuntimeServiceServicer_to_server(_runtime_servicer(self), server)
        self.stubs.services.add_ImageServiceServicer_to_server(_image_servicer(self), server)
        server.add_insecure_port(f"unix://{self.socket}")
        await server.start()
        self.server = server

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop(grace=None)
            self.server = None
        self.socket.unlink(missing_ok=True)

    # ------------------------------------------------------------------------------------------ messages

    def sandbox_metadata(self, sandbox: Sandbox) -> Any:
        return self.stubs.api.PodSandboxMetadata(
            name=sandbox.name, uid=sandbox.uid, namespace=sandbox.namespace, attempt=sandbox.attempt
        )

    def sandbox_state(self, sandbox: Sandbox) -> int:
        api = self.stubs.api
        return int(api.SANDBOX_READY if sandbox.ready else api.SANDBOX_NOTREADY)

    def container_state(self, container: Container) -> int:
        return int(getattr(self.stubs.api, f"CONTAINER_{container.state}"))

    def container_message(self, container: Container) -> Any:
        api = self.stubs.api
        return api.Container(
            id=container.id,
            pod_sandbox_id=container.sandbox.id,
            metadata=api.ContainerMetadata(name=container.name, attempt=container.attempt),
            image=api.ImageSpec(image=container.image),
            image_ref=image_id(container.image),
            image_id=image_id(container.image),
            state=self.container_state(container),
            created_at=_ns(container.created_at),
            labels=container.labels,
            annotations=container.annotations,
        )

    def container_status(self, container: Container) -> Any:
        api = self.stubs.api
        return api.ContainerStatus(
            id=container.id,
            metadata=api.ContainerMetadata(name=container.name, attempt=container.attempt),
            state=self.container_state(container),
            created_at=_ns(container.created_at),
            started_at=_ns(container.started_at),
            finished_at=_ns(container.finished_at),
            exit_code=container.exit_code or 0,
            image=api.ImageSpec(image=container.image),
            image_ref=image_id(container.image),
            image_id=image_id(container.image),
            reason=container.reason,
            message=container.message,
            labels=container.labels,
            annotations=container.annotations,
            log_path=container.log_path,
        )

    def usage(self) -> Any:
        api = self.stubs.api
        return api.FilesystemUsage(
            timestamp=_ns(self.runtime.clock.now()),
            fs_id=api.FilesystemIdentifier(mountpoint=f"/var/lib/{RUNTIME_NAME}"),
            used_bytes=api.UInt64Value(value=0),
            inodes_used=api.UInt64Value(value=0),
        )

    def image_message(self, name: str) -> Any:
        api = self.stubs.api
        return api.Image(
            id=image_id(name),
            repo_tags=[name],
            repo_digests=[f"{name.split(':')[0]}@{image_id(name)}"],
            size=self.runtime.images[name],
            spec=api.ImageSpec(image=name),
        )


async def _answer(context: Any, call: Callable[[], Awaitable[T]]) -> T:
    """Run one call; a `CriError` becomes its gRPC status, as a runtime reports a refusal."""
    try:
        return await call()
    except CriError as error:
        await context.abort(getattr(grpc.StatusCode, error.code), str(error))
        raise  # abort raises; for the type checker


def _runtime_servicer(cri: Cri) -> Any:
    api, runtime = cri.stubs.api, cri.runtime
    base: Any = cri.stubs.services.RuntimeServiceServicer

    class RuntimeService(base):  # type: ignore[misc]
        async def Version(self, request: Any, context: Any) -> Any:
            return api.VersionResponse(
                version=RUNTIME_VERSION,
                runtime_name=RUNTIME_NAME,
                runtime_version=RUNTIME_VERSION,
                runtime_api_version="v1",
            )

        async def Status(self, request: Any, context: Any) -> Any:
            network = api.RuntimeCondition(type="NetworkReady", status=runtime.network_ready)
            if not runtime.network_ready:
                network.reason, network.message = NETWORK_NOT_READY_REASON, NETWORK_NOT_READY_MESSAGE
            return api.StatusResponse(
                status=api.RuntimeStatus(conditions=[api.RuntimeCondition(type="RuntimeReady", status=True), network]),
                runtime_handlers=[api.RuntimeHandler(name="", features=api.RuntimeHandlerFeatures())],
                features=api.RuntimeFeatures(),
            )

        async def RuntimeConfig(self, request: Any, context: Any) -> Any:
            return api.RuntimeConfigResponse(linux=api.LinuxRuntimeConfiguration(cgroup_driver=api.CGROUPFS))

        async def RunPodSandbox(self, request: Any, context: Any) -> Any:
            config = request.config
            options = config.linux.security_context.namespace_options

            async def run() -> Any:
                sandbox = runtime.run_sandbox(
                    name=config.metadata.name,
                    namespace=config.metadata.namespace,
                    uid=config.metadata.uid,
                    attempt=config.metadata.attempt,
                    labels=dict(config.labels),
                    annotations=dict(config.annotations),
                    host_network=options.network == api.NODE,
                    runtime_handler=request.runtime_handler,
                    config=config,
                )
                return api.RunPodSandboxResponse(pod_sandbox_id=sandbox.id)

            return await _answer(context, run)

        async def StopPodSandbox(self, request: Any, context: Any) -> Any:
            runtime.stop_sandbox(request.pod_sandbox_id)
            return api.StopPodSandboxResponse()

        async def RemovePodSandbox(self, request: Any, context: Any) -> Any:
            runtime.remove_sandbox(request.pod_sandbox_id)
            return api.RemovePodSandboxResponse()

        async def PodSandboxStatus(self, request: Any, context: Any) -> Any:
            async def status() -> Any:
                sandbox = runtime.sandbox(request.pod_sandbox_id)
                options = sandbox.config.linux.security_context.namespace_options
                return api.PodSandboxStatusResponse(
                    status=api.PodSandboxStatus(
                        id=sandbox.id,
                        metadata=cri.sandbox_metadata(sandbox),
                        state=cri.sandbox_state(sandbox),
                        created_at=_ns(sandbox.created_at),
                        network=api.PodSandboxNetworkStatus(ip="" if sandbox.host_network else sandbox.ip),
                        linux=api.LinuxPodSandboxStatus(
                            namespaces=api.Namespace(
                                options=api.NamespaceOption(network=options.network, pid=options.pid, ipc=options.ipc)
                            )
                        ),
                        labels=sandbox.labels,
                        annotations=sandbox.annotations,
                        runtime_handler=sandbox.runtime_handler,
                    ),
                    timestamp=_ns(runtime.clock.now()),
                )

            return await _answer(context, status)

        async def ListPodSandbox(self, request: Any, context: Any) -> Any:
            wanted = request.filter if request.HasField("filter") else None
            items = []
            for sandbox in list(runtime.sandboxes.values()):
                if wanted is not None:
                    if wanted.id and wanted.id != sandbox.id:
                        continue
                    if wanted.HasField("state") and wanted.state.state != cri.sandbox_state(sandbox):
                        continue
                    if not _matches(sandbox.labels, wanted.label_selector):
                        continue
                items.append(
                    api.PodSandbox(
                        id=sandbox.id,
                        metadata=cri.sandbox_metadata(sandbox),
                        state=cri.sandbox_state(sandbox),
                        created_at=_ns(sandbox.created_at),
                        labels=sandbox.labels,
                        annotations=sandbox.annotations,
                        runtime_handler=sandbox.runtime_handler,
                    )
                )
            return api.ListPodSandboxResponse(items=items)

        async def CreateContainer(self, request: Any, context: Any) -> Any:
            config = request.config

            async def create() -> Any:
                container = runtime.create_container(
                    request.pod_sandbox_id,
                    name=config.metadata.name,
                    attempt=config.metadata.attempt,
                    image=config.image.image,
                    labels=dict(config.labels),
                    annotations=dict(config.annotations),
                    log_path=config.log_path,
                )
                return api.CreateContainerResponse(container_id=container.id)

            return await _answer(context, create)

        async def StartContainer(self, request: Any, context: Any) -> Any:
            async def start() -> Any:
                await runtime.start_container(request.container_id)
                return api.StartContainerResponse()

            return await _answer(context, start)

        async def StopContainer(self, request: Any, context: Any) -> Any:
            async def stop() -> Any:
                await runtime.stop_container(request.container_id, int(request.timeout))
                return api.StopContainerResponse()

            return await _answer(context, stop)

        async def RemoveContainer(self, request: Any, context: Any) -> Any:
            runtime.remove_container(request.container_id)
            return api.RemoveContainerResponse()

        async def ListContainers(self, request: Any, context: Any) -> Any:
            wanted = request.filter if request.HasField("filter") else None
            items = []
            for container in list(runtime.containers.values()):
                if wanted is not None:
                    if wanted.id and wanted.id != container.id:
                        continue
                    if wanted.pod_sandbox_id and wanted.pod_sandbox_id != container.sandbox.id:
                        continue
                    if wanted.HasField("state") and wanted.state.state != cri.container_state(container):
                        continue
                    if not _matches(container.labels, wanted.label_selector):
                        continue
                items.append(cri.container_message(container))
            return api.ListContainersResponse(containers=items)

        async def ContainerStatus(self, request: Any, context: Any) -> Any:
            async def status() -> Any:
                return api.ContainerStatusResponse(status=cri.container_status(runtime.container(request.container_id)))

            return await _answer(context, status)

        async def ContainerStats(self, request: Any, context: Any) -> Any:
            async def stats() -> Any:
                return api.ContainerStatsResponse(stats=_container_stats(cri, runtime.container(request.container_id)))

            return await _answer(context, stats)

        async def ListContainerStats(self, request: Any, context: Any) -> Any:
            return api.ListContainerStatsResponse(stats=[_container_stats(cri, c) for c in runtime.running()])

        async def ListPodSandboxStats(self, request: Any, context: Any) -> Any:
            items = [
                api.PodSandboxStats(
                    attributes=api.PodSandboxAttributes(
                        id=s.id, metadata=cri.sandbox_metadata(s), labels=s.labels, annotations=s.annotations
                    ),
                    linux=api.LinuxPodSandboxStats(),
                )
                for s in runtime.sandboxes.values()
                if s.ready
            ]
            return api.ListPodSandboxStatsResponse(stats=items)

    return RuntimeService()


def _container_stats(cri: Cri, container: Container) -> Any:
    api = cri.stubs.api
    now = _ns(cri.runtime.clock.now())
    return api.ContainerStats(
        attributes=api.ContainerAttributes(
            id=container.id,
            metadata=api.ContainerMetadata(name=container.name, attempt=container.attempt),
            labels=container.labels,
            annotations=container.annotations,
        ),
        cpu=api.CpuUsage(timestamp=now, usage_core_nano_seconds=api.UInt64Value(value=0)),
        memory=api.MemoryUsage(timestamp=now, working_set_bytes=api.UInt64Value(value=0)),
        writable_layer=cri.usage(),
    )


def _image_servicer(cri: Cri) -> Any:
    api, runtime = cri.stubs.api, cri.runtime
    base: Any = cri.stubs.services.ImageServiceServicer

    class ImageService(base):  # type: ignore[misc]
        async def ListImages(self, request: Any, context: Any) -> Any:
            return api.ListImagesResponse(images=[cri.image_message(name) for name in sorted(runtime.images)])

        async def ImageStatus(self, request: Any, context: Any) -> Any:
            name = request.image.image
            if name not in runtime.images:
                return api.ImageStatusResponse()
            return api.ImageStatusResponse(image=cri.image_message(name))

        async def PullImage(self, request: Any, context: Any) -> Any:
            name = request.image.image
            runtime.images.setdefault(name, 1_000_000)
            return api.PullImageResponse(image_ref=image_id(name))

        async def RemoveImage(self, request: Any, context: Any) -> Any:
            runtime.images.pop(request.image.image, None)
            return api.RemoveImageResponse()

        async def ImageFsInfo(self, request: Any, context: Any) -> Any:
            return api.ImageFsInfoResponse(image_filesystems=[cri.usage()], container_filesystems=[cri.usage()])

    return ImageService()
