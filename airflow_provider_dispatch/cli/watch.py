"""`--watch` for `dispatch status`, `find` and `list`: re-read on every change, print what changed, until Ctrl-C.

A watch here only says "something that may matter changed", as in `triggers/watch.py`: the command then reads
again through the same read-only program and prints the new answer if it differs, so what is printed is always
a consistent read assessed by the rule, never pieced together from events. The streams are the official sync
client's (`kubernetes.watch.Watch`), one daemon thread per kind: the shared async watch of the triggers lives in
a package that imports Airflow, which this command must not import. Each stream follows the informer
discipline: a list (`limit=1`, a quorum read) for the resourceVersion, then a watch from it with bookmarks; when
a stream fails or its resourceVersion expires (410), it pauses (the triggers' backoff, 0.5 s to 30 s), tells
the command (a re-read covers anything missed) and lists again. A re-read also happens every `RESYNC_SECONDS`
whatever the streams said, so a stream that cannot run (no permission to watch Nodes, say) delays a change by
at most that long.

Ctrl-C ends the command with exit 0 (kubectl's `get --watch` exits 1 on Ctrl-C). A failed re-read ends it with
that error's exit code, as the first read would.

Ctrl-C is a message, not an exception. `interrupts` installs a SIGINT handler that only puts `INTERRUPTED` in
the inbox the main thread waits on, so the interrupt is never raised inside the client, urllib3 or a lock, and
it works even when the process started with SIGINT ignored: a shell starts a background job so (`dispatch
status -w ... &` in a script, or a test runner started that way), and Python then installs no KeyboardInterrupt
handler at all, so a Ctrl-C that waits for KeyboardInterrupt never comes. The reads run on their own daemon
thread, as the streams do, so the main thread only waits on the inbox and prints: Ctrl-C ends the command at
once even while a read waits on a slow server, and closing the client afterwards takes no lock a reading thread
holds (urllib3 keeps its pool locks only around taking and returning a connection, never across a read).
"""

from __future__ import annotations

import logging
import queue
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

import kubernetes

from airflow_provider_dispatch.backoff import Backoff, BackoffSchedule
from airflow_provider_dispatch.dispatch.transport import AUTH_SETTINGS, HEADERS
from airflow_provider_dispatch.dispatch.vocabulary import ApiCoordinates

logger = logging.getLogger(__name__)
_T = TypeVar("_T")

#: the longest a change can go unseen when a stream is down, and how often AGE-dependent text is refreshed
RESYNC_SECONDS: Final = 30.0
#: one watch request's length before it is resumed (the apiserver caps it at its own limit)
WATCH_TIMEOUT_SECONDS: Final = 290
#: the pause between failed attempts, as the triggers' watches pause
RECONNECT_BACKOFF: Final = BackoffSchedule(initial=0.5, maximum=30.0)


class Streams:
    """One list-then-watch thread per (kind, namespace); any event sets `changed`."""

    def __init__(
        self,
        api_client: kubernetes.client.ApiClient,
        sources: Iterable[tuple[ApiCoordinates, str | None]],
        changed: threading.Event,
    ):
        self.api_client = api_client
        self.changed = changed
        self.stopped = threading.Event()
        self.threads = [
            threading.Thread(target=self._follow, args=(coords, namespace), daemon=True, name=coords.resource)
            for coords, namespace in dict.fromkeys(sources)
        ]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def stop(self) -> None:
        self.stopped.set()

    def _call(self, coords: ApiCoordinates, namespace: str | None, query: list[tuple[str, str]]) -> Any:
        return self.api_client.call_api(
            coords.path(namespace),
            "GET",
            query_params=query,
            header_params=dict(HEADERS),
            auth_settings=list(AUTH_SETTINGS),
            _preload_content=False,
            _request_timeout=(10.0, 90.0),
        )

    def _list_resource_version(self, coords: ApiCoordinates, namespace: str | None) -> str:
        import json

        response = self._call(coords, namespace, [("limit", "1")])
        try:
            body = json.loads(response.data)
        finally:
            response.release_conn()
        return str(body["metadata"]["resourceVersion"])

    def _follow(self, coords: ApiCoordinates, namespace: str | None) -> None:
        retries = Backoff(RECONNECT_BACKOFF)
        version: str | None = None

        def watch(**kwargs: Any) -> Any:
            query = [
                ("watch", "true"),
                ("resourceVersion", str(kwargs["resource_version"])),
                ("allowWatchBookmarks", "true"),
                ("timeoutSeconds", str(kwargs["timeout_seconds"])),
            ]
            return self._call(coords, namespace, query)

        while not self.stopped.is_set():
            delivered = False
            try:
                if version is None:
                    version = self._list_resource_version(coords, namespace)
                    retries.reset()
                    self.changed.set()  # whatever changed before this list, a re-read covers it
                stream = kubernetes.watch.Watch()
                for event in stream.stream(watch, resource_version=version, timeout_seconds=WATCH_TIMEOUT_SECONDS):
                    delivered = True
                    retries.reset()
                    seen = ((event.get("raw_object") or {}).get("metadata") or {}).get("resourceVersion")
                    version = seen if isinstance(seen, str) and seen else version
                    if event.get("type") != "BOOKMARK":
                        self.changed.set()
                    if self.stopped.is_set():
                        stream.stop()
            except kubernetes.client.exceptions.ApiException as error:
                if error.status == 410:  # compacted: list again, and re-read in case something was missed
                    version = None
                    self.changed.set()
                logger.debug("dispatch: watch of %s failed (%s)", coords.resource, error)
            except Exception as error:  # resumed after a pause; the periodic re-read covers the gap
                logger.debug("dispatch: watch of %s failed (%s)", coords.resource, error)
            if not delivered:
                self.stopped.wait(retries.next_delay())


class Interrupted:
    """Ctrl-C, as the inbox carries it."""


#: what the SIGINT handler puts in the inbox
INTERRUPTED: Final = Interrupted()


@dataclass(frozen=True)
class Answer(Generic[_T]):
    """A read's answer, as the reading thread hands it over."""

    value: _T


@dataclass(frozen=True)
class Failed:
    """A read's exception, raised again by the main thread (a `DispatchError` ends the command with its code)."""

    error: BaseException


@contextmanager
def interrupts() -> Iterator[queue.SimpleQueue[Any]]:
    """An inbox that receives `INTERRUPTED` on SIGINT instead of a KeyboardInterrupt, while inside.

    `SimpleQueue.put` is reentrant: the handler may run while the main thread is inside `get` on the same queue.
    The handler is installed whatever SIGINT's disposition was (also SIG_IGN, as a background job inherits it),
    and the previous one is restored on the way out. Off the main thread no handler can be installed, and none
    is needed: no Ctrl-C reaches it.
    """
    inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
    if threading.current_thread() is not threading.main_thread():
        yield inbox
        return
    previous = signal.signal(signal.SIGINT, lambda signum, frame: inbox.put(INTERRUPTED))
    try:
        yield inbox
    finally:
        signal.signal(signal.SIGINT, signal.SIG_DFL if previous is None else previous)


def _read_on_change(
    read: Callable[[], _T], changed: threading.Event, inbox: queue.SimpleQueue[Any], resync: float
) -> None:
    """Read now, then again after each wake-up, handing each answer (or the first failure) to the main thread."""
    while True:
        try:
            answer = read()
        except BaseException as error:  # the main thread raises it: the command ends as the first read would
            inbox.put(Failed(error))
            return
        inbox.put(Answer(answer))
        changed.wait(resync)
        changed.clear()


def watch(
    read: Callable[[], _T],
    first: Callable[[_T], str],
    change: Callable[[_T, _T], str | None],
    sources: Callable[[_T], Iterable[tuple[ApiCoordinates, str | None]]],
    api_client: kubernetes.client.ApiClient,
    inbox: queue.SimpleQueue[Any],
    echo: Callable[[str], None],
    *,
    resync: float = RESYNC_SECONDS,
) -> None:
    """Print the first answer, then what changed after each re-read (None: nothing to print), until Ctrl-C.

    The main thread only waits on `inbox` (see `interrupts`) and prints; reads happen on a daemon thread, woken
    by the streams of what the first answer depends on. A failed read is raised here.
    """
    changed = threading.Event()
    reader = threading.Thread(
        target=_read_on_change, args=(read, changed, inbox, resync), daemon=True, name="dispatch-read"
    )
    reader.start()
    previous = _next(inbox)
    if previous is INTERRUPTED:
        return
    text = first(previous)
    if text:
        echo(text)
    streams = Streams(api_client, sources(previous), changed)
    streams.start()
    try:
        while (current := _next(inbox)) is not INTERRUPTED:
            update = change(previous, current)
            if update:
                echo(update)
            previous = current
    finally:
        streams.stop()


def _next(inbox: queue.SimpleQueue[Any]) -> Any:
    """The next answer or `INTERRUPTED`; a failed read's exception is raised."""
    message = inbox.get()
    if isinstance(message, Failed):
        raise message.error
    return message.value if isinstance(message, Answer) else message


__all__ = ["INTERRUPTED", "RECONNECT_BACKOFF", "RESYNC_SECONDS", "Streams", "interrupts", "watch"]
