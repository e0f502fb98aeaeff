"""A node's network path to the API server: a loopback TCP relay the scenario can cut (a partition) and heal.

Each hollow kubelet reaches the API server through its own relay (its kubeconfig names the relay's port; TLS
passes through untouched, so the kubelet verifies the API server's certificate as it would). `cut()` is a
partition that drops packets, not one that refuses them: the relay stops moving bytes in both directions and
keeps every connection open, so the kubelet's requests and watches hang until its own timeouts give up on them
(its HTTP/2 health check, the heartbeat client's 10 s timeout), and the API server sees nothing. A connection the
kubelet opens meanwhile is accepted by the kernel and then hangs too, so it fails on the client's TLS handshake
timeout (10 s) rather than on its dial timeout (30 s) as an unanswered SYN would. `heal()` moves the bytes again:
whatever either side sent meanwhile (a request, a FIN) arrives then, as TCP retransmission would deliver it after
a partition shorter than the connection's own timeouts.

`cut(refuse=True)` is the other failure a client meets: every connection is reset at once and new ones are
refused until `heal()` (an API server restarting, a load balancer with no backend).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct

logger = logging.getLogger(__name__)

_CHUNK = 64 * 1024


class PartitionRelay:
    """One node's relay: 127.0.0.1:`port` to the API server's `upstream` port, on the caller's event loop."""

    def __init__(self, name: str, upstream_port: int) -> None:
        self.name = name
        self.upstream_port = upstream_port
        self.port = 0
        self._server: asyncio.Server | None = None
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._refusing = False
        self._links: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def cut_off(self) -> bool:
        return not self._flowing.is_set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    def cut(self, *, refuse: bool = False) -> None:
        """Partition the node: no byte moves either way until `heal()` (with `refuse`, connections are reset)."""
        self._flowing.clear()
        self._refusing = refuse
        if refuse:
            self.drop_connections()
        logger.info("relay %s: cut%s", self.name, " (refusing)" if refuse else "")

    def drop_connections(self) -> None:
        """Reset every connection (a machine that rebooted has none of its old ones)."""
        for client, upstream in list(self._links):
            _reset(client)
            _reset(upstream)

    def heal(self) -> None:
        self._refusing = False
        self._flowing.set()
        logger.info("relay %s: healed", self.name)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        self.drop_connections()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
        self._server = None

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._refusing:
            _reset(writer)
            return
        await self._flowing.wait()  # a connection made during a partition hangs until it heals
        if self._refusing:
            _reset(writer)
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            _reset(writer)
            return
        link = (writer, up_writer)
        self._links.add(link)
        try:
            async with asyncio.TaskGroup() as pumps:
                for source, sink in ((reader, up_writer), (up_reader, writer)):
                    task = pumps.create_task(self._pump(source, sink))
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)
        except* (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self._links.discard(link)
            writer.close()
            up_writer.close()

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        while True:
            await self._flowing.wait()
            data = await source.read(_CHUNK)
            await self._flowing.wait()  # bytes read as the cut landed are held, not dropped
            if not data:
                with contextlib.suppress(OSError):
                    if sink.can_write_eof():
                        sink.write_eof()
                return
            sink.write(data)
            await sink.drain()


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with a reset (SO_LINGER 0), as a refused or torn-down connection looks to its peer."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.close()
