"""Issue 7 item 3, plain mode: the identities of `Lab(rbac=True)`, crafted names, and credentials in output.

* the read-only identity (`reader`) inspects, finds and proves cessation; every write it attempts is refused
  with a clear message: before anything is sent by a read-only adapter, at the server (403) by a writer adapter
  holding its credentials; nothing changes in the store;
* the identity without Nodes (`no-nodes`) sees each node as `not readable` and never `ceased`, whatever the
  node's real state (where the reader, who may read Nodes, proves cessation: the control);
* names and label values crafted to change a selector or a URL are refused before any request is sent;
* tokens and kubeconfig contents appear in no log record (DEBUG, every logger), no error message and nothing
  printed, for runs that succeed and runs that fail.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from dispatch_lab.cluster import Cluster
from dispatch_lab.either import Either

from airflow_provider_dispatch.dispatch import AsyncDispatchAdapter, DispatchAdapter
from airflow_provider_dispatch.dispatch.errors import (
    DispatchError,
    ForbiddenError,
    InvalidNameError,
    PodFenceError,
    PodsRemainError,
    RefusedError,
)
from airflow_provider_dispatch_lab.apiserver.auth.auth import Authenticator, UserInfo
from airflow_provider_dispatch_lab.apiserver.auth.rbac_setup import ADMIN_USER
from airflow_provider_dispatch_lab.runtime import Lab, write_kubeconfig
from airflow_provider_dispatch_lab.scenario import manifests
from airflow_provider_dispatch_lab.scenario.pod_fence import install_pod_fence, remove_pod_fence

from .harness import Journal

Obj = dict[str, Any]


class CountingAuthenticator:
    """Wraps the lab's authenticator: every request that reaches the server is counted, before RBAC can refuse
    it (the journal sees only requests that RBAC let through)."""

    def __init__(self, inner: Authenticator) -> None:
        self.inner = inner
        self.requests = 0

    def authenticate(self, authorization: str | None) -> UserInfo | None:
        self.requests += 1
        return self.inner.authenticate(authorization)


@dataclass
class RbacLab:
    lab: Lab
    journal: Journal
    admin: kubernetes.client.ApiClient
    counter: CountingAuthenticator

    def revision(self) -> int:
        return self.lab.call(lambda: self.lab.inner.store.revision)

    def requests(self) -> int:
        """How many requests reached the server so far, refused ones included."""
        return self.lab.call(lambda: self.counter.requests)

    def cluster(self) -> Cluster:
        built = Cluster(self.admin, "")
        built.namespace = f"s-{uuid.uuid4().hex[:10]}"
        built.core.create_namespace({"metadata": {"name": built.namespace}})
        return built


@pytest.fixture(scope="module")
def rbac_lab() -> Iterator[RbacLab]:
    journal = Journal(watched=lambda user: user != ADMIN_USER)
    with Lab(speed=0.0, rbac=True, middlewares=(journal.middleware,)) as lab:
        server = lab.inner.server
        counter = CountingAuthenticator(server.authenticator)
        server.authenticator = counter
        admin = kubernetes.config.new_client_from_config(config_file=str(lab.kubeconfig()))
        yield RbacLab(lab, journal, admin, counter)
        admin.close()


@pytest.fixture(params=["sync", "async"])
async def adapters(rbac_lab: RbacLab, request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    made: list[Either] = []
    kind = str(request.param)

    async def make(identity: str, **options: Any) -> Either:
        adapter = await Either.from_kubeconfig(kind, rbac_lab.lab.kubeconfig_for(identity), **options)
        made.append(adapter)
        return adapter

    yield make
    for adapter in made:
        await adapter.call("close")


def _held_with_pods(cluster: Cluster, node_state: str) -> tuple[str, str]:
    """Execution 1 held, its pod Terminating on a node that is `ready`, `lost`, `fenced` (lost, then tainted
    out-of-service: proven ceased) or `deleted`."""
    runtime = cluster.runtime()
    node = cluster.node("n1")
    cluster.held_after_execution("ft-7", runtime=runtime, admission=1, pods_on=[node])
    if node_state in ("lost", "fenced"):
        cluster.lose_node(node)
    if node_state == "fenced":
        cluster.taint_out_of_service(node)
    if node_state == "deleted":
        cluster.delete_node(node)
    return f"{cluster.namespace}/ft-7", node


# --- the read-only identity ---------------------------------------------------------------------------------


@pytest.mark.parametrize("read_only", [True, False])
async def test_the_reader_inspects_finds_and_proves_cessation(
    rbac_lab: RbacLab, adapters: Any, read_only: bool
) -> None:
    reader = await adapters("reader", read_only=read_only)
    cluster = rbac_lab.cluster()
    ref, node = _held_with_pods(cluster, "fenced")
    mark, revision = rbac_lab.journal.mark(), rbac_lab.revision()
    status = await reader.call("inspect", ref)
    assert status.ceased
    assert f"on {node} (Ready=Unknown, out-of-service)" in status.detail
    assert (await reader.call("find", cluster.namespace, "ft-7")).ref == ref
    assert await reader.call("ceased", ref) is True
    assert [p.node.label for p in (await reader.call("remaining_pods", ref)).remaining] == [
        "Ready=Unknown, out-of-service"
    ]
    calls = rbac_lab.journal.since(mark)
    assert calls
    assert {c.method for c in calls} == {"GET"}
    assert all(c.ok for c in calls), [c.describe() for c in calls if not c.ok]
    assert rbac_lab.revision() == revision


@pytest.mark.parametrize("operation", ["release", "hold", "open"])
async def test_a_read_only_adapter_refuses_every_write_before_sending(
    rbac_lab: RbacLab, adapters: Any, operation: str
) -> None:
    reader = await adapters("reader", read_only=True)
    cluster = rbac_lab.cluster()
    ref, _ = _held_with_pods(cluster, "ready")
    target: object = ref
    if operation == "open":
        target = {
            **manifests.trainjob("ft-8", runtime="rt"),
            "metadata": {"name": "ft-8", "namespace": cluster.namespace},
        }
    sent, revision = rbac_lab.requests(), rbac_lab.revision()
    with pytest.raises(ForbiddenError) as refused:
        await reader.call(operation, target)
    message = str(refused.value)
    assert "read-only" in message
    assert "nothing was sent" in message
    assert cluster.namespace in message
    assert rbac_lab.requests() == sent
    assert rbac_lab.revision() == revision


@pytest.mark.parametrize("operation", ["release", "hold", "open"])
async def test_the_readers_credentials_are_refused_at_the_server(
    rbac_lab: RbacLab, adapters: Any, operation: str
) -> None:
    """A writer adapter given the reader's credentials: the server refuses the write (403), with a message
    that names the missing permission; nothing changes."""
    reader = await adapters("reader")
    cluster = rbac_lab.cluster()
    runtime = cluster.runtime()
    if operation == "hold":
        cluster.trainjob("ft-7", runtime=runtime, admission=1, suspend=False)
        target: object = f"{cluster.namespace}/ft-7"
    elif operation == "release":
        cluster.held_after_execution("ft-7", runtime=runtime, admission=1)
        target = f"{cluster.namespace}/ft-7"
    else:
        body = manifests.trainjob("ft-7", runtime=runtime)
        body["metadata"]["namespace"] = cluster.namespace
        target = body
    mark, revision = rbac_lab.journal.mark(), rbac_lab.revision()
    with pytest.raises(ForbiddenError) as refused:
        await reader.call(operation, target)
    verb = "create" if operation == "open" else "update"
    assert f"lack the permission `{verb} trainjobs.trainer.kubeflow.org`" in str(refused.value)
    assert f'in namespace "{cluster.namespace}"' in str(refused.value)
    assert not refused.value.retryable
    assert "(403" in str(refused.value)  # the server's answer: RBAC refused it before the journal saw it
    assert not [c for c in rbac_lab.journal.since(mark) if c.writes]
    assert rbac_lab.revision() == revision


# --- the identity without Nodes -----------------------------------------------------------------------------


@pytest.mark.parametrize("node_state", ["ready", "lost", "fenced", "deleted"])
async def test_without_nodes_a_node_is_not_readable_and_never_ceased(
    rbac_lab: RbacLab, adapters: Any, node_state: str
) -> None:
    no_nodes = await adapters("no-nodes")
    reader = await adapters("reader", read_only=True)
    cluster = rbac_lab.cluster()
    ref, node = _held_with_pods(cluster, node_state)
    # the control: an identity that may read Nodes proves cessation where the node's state proves it (a deleted
    # Node only once a writer's check recorded since when it is gone, and the wait has passed: fencing.py)
    assert await reader.call("ceased", ref) is (node_state == "fenced")
    assert await no_nodes.call("ceased", ref) is False
    status = await no_nodes.call("inspect", ref)
    assert not status.ceased
    assert f"on {node} (not readable)" in status.detail
    with pytest.raises(PodsRemainError) as refused:
        await no_nodes.call("release", ref)
    assert not refused.value.ceased
    assert "(not readable)" in str(refused.value)


async def test_an_identity_that_may_not_read_the_pod_fence_is_told_which_role_to_grant(
    rbac_lab: RbacLab, adapters: Any
) -> None:
    """The writer without dispatch-fence-reader (`no-nodes`, dispatch-writer alone), with `require_pod_fence`:
    the check cannot verify the fence, refuses with the role to grant, and writes nothing. The fence is the check's
    last read (after the pods, programs/releasing.py), so the previous execution left no pod here: nothing else
    refuses."""
    install_pod_fence(rbac_lab.admin)
    try:
        no_fence = await adapters("no-nodes", require_pod_fence=True)
        cluster = rbac_lab.cluster()
        cluster.held_after_execution("ft-7", runtime=cluster.runtime(), admission=1, pods_on=[])
        ref = f"{cluster.namespace}/ft-7"
        revision = rbac_lab.revision()
        with pytest.raises(PodFenceError) as refused:
            await no_fence.call("release", ref)
        assert "dispatch may not read the pod fence" in str(refused.value)
        assert "dispatch-fence-reader" in str(refused.value)
        assert rbac_lab.revision() == revision
    finally:
        remove_pod_fence(rbac_lab.admin)


# --- crafted names ------------------------------------------------------------------------------------------

CRAFTED = ["a,b", "x=y", "../x", "%2F", "a/b", "a\nb", "a\n", "ünï", "a" * 64, "!x", "x in (y)", "x notin (y)", ""]


def _manifest(namespace: str, name: str, **labels: str) -> Obj:
    body = manifests.trainjob(name, runtime="rt")
    body["metadata"]["namespace"] = namespace
    body["metadata"]["labels"].update(labels)
    return body


@pytest.mark.parametrize("value", CRAFTED, ids=[repr(v) for v in CRAFTED])
async def test_crafted_names_and_label_values_are_refused_before_any_request(
    rbac_lab: RbacLab, adapters: Any, value: str
) -> None:
    writer = await adapters("writer")
    attempts: list[tuple[str, tuple[Any, ...]]] = [
        ("release", (f"ns/{value}",)),
        ("release", (f"{value}/ft-7",)),
        ("hold", (f"ns/{value}",)),
        ("inspect", (f"ns/{value}",)),
        ("ceased", (f"{value}/ft-7",)),
        ("remaining_pods", (f"ns/{value}",)),
        ("find", ("ns", value)),
        ("find", (value, "job")),
        ("open", (_manifest("ns", value),)),
        ("open", (_manifest(value, "ft-7"),)),
        ("open", (_manifest("ns", "ft-7", **{"dispatch.phpboyscout.uk/job-id": value}),)),
        ("open", (_manifest("ns", "ft-7", **{"dispatch.phpboyscout.uk/submission": value}),)),
    ]
    if len(value) <= 63:  # a runtime name may be a 253-character subdomain: 64 letters are a valid one
        runtime_named = _manifest("ns", "ft-7")
        runtime_named["spec"]["runtimeRef"]["name"] = value
        attempts.append(("open", (runtime_named,)))
    sent = rbac_lab.requests()
    for operation, args in attempts:
        with pytest.raises(RefusedError) as refused:
            await writer.call(operation, *args)
        assert isinstance(refused.value, InvalidNameError | RefusedError)
        said = str(refused.value)
        reasons = ("not allowed", "is empty", "characters long", "has no metadata.namespace")
        assert any(reason in said for reason in reasons), f"{operation}{args!r:.80}: {said}"
    assert rbac_lab.requests() == sent


async def test_a_remaining_pods_selector_for_a_deleted_trainjob_is_validated(rbac_lab: RbacLab, adapters: Any) -> None:
    """`remaining_pods` for a deleted TrainJob builds its selectors from the caller's job id and submission."""
    reader = await adapters("reader", read_only=True)
    cluster = rbac_lab.cluster()
    mark = rbac_lab.journal.mark()
    for crafted in ("a,b", "x=y", "!x"):
        with pytest.raises(InvalidNameError):
            await reader.call("remaining_pods", f"{cluster.namespace}/gone", job_id=crafted, submission="1")
        with pytest.raises(InvalidNameError):
            await reader.call("ceased", f"{cluster.namespace}/gone", job_id="j", submission=crafted)
    selectors = [c.query.get("labelSelector", "") for c in rbac_lab.journal.since(mark)]
    assert not any("a,b" in s or "x=y" in s or "!x" in s for s in selectors), selectors


# --- credentials never leave ------------------------------------------------------------------------------------


def _secrets(path: Path) -> list[str]:
    """The credential parts of a kubeconfig: each token, and the token's pieces (a JWT's three parts)."""
    text = path.read_text()
    tokens = re.findall(r"token:\s*(\S+)", text)
    pieces = [part for token in tokens for part in token.split(".") if len(part) >= 12]
    return [*tokens, *pieces]


def _everything_said(
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str], errors: list[BaseException]
) -> str:
    parts = []
    for record in caplog.records:
        parts.append(record.getMessage())
        if record.exc_info and record.exc_info[1] is not None:
            parts.append(repr(record.exc_info[1]))
    captured = capsys.readouterr()
    parts += [captured.out, captured.err]
    for error in errors:
        parts += [str(error), repr(error), repr(getattr(error, "__dict__", {})), repr(error.args)]
    return "\n".join(parts)


async def test_no_token_or_kubeconfig_text_in_logs_errors_or_output(
    rbac_lab: RbacLab,
    adapters: Any,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    caplog.set_level(logging.DEBUG)  # every logger: dispatch, kubernetes, urllib3, aiohttp, asyncio
    for name in ("kubernetes", "kubernetes_asyncio", "urllib3", "aiohttp", "airflow_provider_dispatch"):
        logging.getLogger(name).setLevel(logging.DEBUG)
    cluster = rbac_lab.cluster()
    ref, _ = _held_with_pods(cluster, "lost")
    drained = rbac_lab.cluster()
    runtime = drained.runtime()
    drained.held_after_execution("ft-7", runtime=runtime, admission=1)
    errors: list[BaseException] = []
    secrets: list[str] = []

    async def attempt(adapter: Either, operation: str, *args: Any) -> Any:
        try:
            return await adapter.call(operation, *args)
        except DispatchError as error:
            errors.append(error)
            return None

    # succeeding runs, and failing ones: pods remain, forbidden, not found
    writer = await adapters("writer")
    secrets += _secrets(rbac_lab.lab.kubeconfig_for("writer"))
    assert (await attempt(writer, "release", f"{drained.namespace}/ft-7")) is not None
    await attempt(writer, "release", ref)
    await attempt(writer, "inspect", ref)
    await attempt(writer, "release", f"{cluster.namespace}/missing")
    reader = await adapters("reader")
    secrets += _secrets(rbac_lab.lab.kubeconfig_for("reader"))
    await attempt(reader, "hold", ref)
    # a token the server does not accept (401), and a server nobody listens on
    bad = write_kubeconfig(tmp_path / "bad.yaml", rbac_lab.lab.url, "not-a-valid-token-" + uuid.uuid4().hex)
    secrets += _secrets(bad)
    stranger = Either("sync", DispatchAdapter.from_kubeconfig(bad))
    await attempt(stranger, "release", ref)
    await attempt(stranger, "inspect", ref)
    closed = write_kubeconfig(tmp_path / "closed.yaml", "http://127.0.0.1:9", "closed-port-token-" + uuid.uuid4().hex)
    secrets += _secrets(closed)
    await attempt(Either("sync", DispatchAdapter.from_kubeconfig(closed)), "release", ref)
    # a kubeconfig that does not parse, with a token in it
    broken = tmp_path / "broken.yaml"
    leaked = "broken-kubeconfig-token-" + uuid.uuid4().hex
    broken.write_text(f"users:\n- name: u\n  user:\n    token: {leaked}\n  : [unbalanced\n")
    secrets.append(leaked)
    try:
        DispatchAdapter.from_kubeconfig(broken)
    except DispatchError as error:
        errors.append(error)
    try:
        await AsyncDispatchAdapter.from_kubeconfig(broken)
    except DispatchError as error:
        errors.append(error)

    assert len(secrets) >= 6
    assert all(len(s) >= 12 for s in secrets)
    assert len(errors) >= 7, [type(e).__name__ for e in errors]
    kinds = {type(e).__name__ for e in errors}
    assert {"PodsRemainError", "ForbiddenError", "NotFoundError", "UnreachableError", "RefusedError"} <= kinds
    said = _everything_said(caplog, capsys, errors)
    assert len(caplog.records) > 0
    leaks = sorted({s[:16] + "..." for s in secrets if s in said})
    assert not leaks, f"credentials found in logs, errors or output: {leaks}"


@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize(
    "config",
    [
        {"users": [{"name": "u", "user": {"token": "dict-token-SECRET-1"}}]},
        {"clusters": [{"name": "c", "cluster": {"server": "http://u:dict-password-SECRET-2@127.0.0.1:9"}}]},
        {"users": [{"name": "u", "user": {"client-key-data": "ZGljdC1rZXktU0VDUkVULTM="}}], "current-context": "x"},
    ],
)
async def test_a_kubeconfig_dict_that_cannot_be_loaded_is_not_quoted(config: Mapping[str, Any], kind: str) -> None:
    async def build() -> object:
        if kind == "sync":
            return DispatchAdapter.from_config_dict(config)
        return await AsyncDispatchAdapter.from_config_dict(config)

    with pytest.raises(RefusedError) as refused:
        await build()
    text = f"{refused.value} {refused.value!r}"
    assert "SECRET" not in text, text
    assert "ZGljdC1rZXktU0VDUkVULTM=" not in text, text
