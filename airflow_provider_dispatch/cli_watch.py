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
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any, Final, TypeVar

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

    def __init__(self, api_client: kubernetes.client.ApiClient, sources: Iterable[tuple[ApiCoordinates, str | None]]):
        self.api_client = api_client
        self.changed = threading.Event()
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


def follow(
    initial: _T,
    read: Callable[[], _T],
    first: Callable[[_T], str],
    change: Callable[[_T, _T], str | None],
    changed: threading.Event,
    echo: Callable[[str], None],
    *,
    resync: float = RESYNC_SECONDS,
) -> None:
    """Print the first answer, then what changed after each wake-up (None: nothing to print). Ends on Ctrl-C."""
    previous = initial
    try:
        text = first(previous)
        if text:
            echo(text)
        while True:
            changed.wait(resync)
            changed.clear()
            current = read()
            update = change(previous, current)
            if update:
                echo(update)
            previous = current
    except KeyboardInterrupt:
        return


__all__ = ["RECONNECT_BACKOFF", "RESYNC_SECONDS", "Streams", "follow"]
