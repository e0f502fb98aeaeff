"""The real API server's drain check benchmark at a tiny scale, so that the script cannot rot.

A real etcd and kube-apiserver (the built control plane), a namespace of a few hundred pods seeded through the
API, every case in both states, and what must hold at any scale, none of it a time: every case finds the job's
pods; the counters moved (the server spent CPU on every case, the lists were counted where they were served);
in the `active` state the pinned read's two lists come from the watch cache and nothing of the namespace from
etcd; in the `quiet` state its Exact list goes to etcd, which sends at least the namespace's pods. That last
pair is the finding of docs/performance.md ("The real API server's side"), kept true by this test.
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_dispatch_lab.real.binaries import locate

from .real_drain_bench import BASELINE, CASES, Config, render_markdown, run
from .real_meter import ServerReading

JOB_PODS, NODES, SIZE = 8, 2, 200
pytestmark = pytest.mark.slow  # a minute or two: the API server, its CRDs, seeding, and one compaction


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    config = Config(
        sizes=(SIZE,),
        job_pods=JOB_PODS,
        nodes=NODES,
        windows=1,
        calls=2,
        idle_seconds=1.0,
        compaction_interval="10s",
        quiet_timeout=120.0,
        build=locate(build=False),
        workdir=tmp_path_factory.mktemp("real-bench"),
    )
    return run(config)


def medians(results: dict[str, Any], state: str) -> dict[str, ServerReading]:
    (size,) = results["sizes"]
    return {case: ServerReading.from_json(r["median"]) for case, r in size["states"][state]["cases"].items()}


def test_every_case_in_every_state_selects_the_jobs_pods(results: dict[str, Any]) -> None:
    (size,) = results["sizes"]
    assert size["listedPods"] == SIZE  # the pods copied in etcd are listed by the API like the ones it made
    assert set(size["states"]) == {"active", "quiet"}
    for state in size["states"].values():
        selected = {case: r["selected"] for case, r in state["cases"].items()}
        assert set(selected) == set(CASES)
        assert len(selected[BASELINE]) == JOB_PODS
        assert all(names == selected[BASELINE] for names in selected.values())


def test_the_server_spent_cpu_and_served_every_list(results: dict[str, Any]) -> None:
    for state in ("active", "quiet"):
        m = medians(results, state)
        assert m[BASELINE].apiserver_cpu > 0  # (a cheap case may round to one CPU clock tick or none)
        assert sum(r.apiserver_cpu for r in m.values()) > m[BASELINE].apiserver_cpu
        assert all(r.cache_lists + r.etcd_lists >= 1 for r in m.values()), m
        # the namespace-wide reads are answered with the namespace: more bytes than the job's two lists
        assert m["baseline"].list_response_bytes > m["pinned"].list_response_bytes > 0
        assert m["full"].list_response_bytes >= m["baseline"].list_response_bytes * 0.9


def test_the_pinned_read_is_served_by_the_watch_cache_while_pods_change(results: dict[str, Any]) -> None:
    pinned = medians(results, "active")["pinned"]
    assert pinned.cache_lists == 2  # both selector lists, the Exact one from a snapshot
    assert pinned.etcd_fetched < SIZE  # at most the one object a consistent read's revision probe fetches


def test_the_pinned_reads_exact_list_goes_to_etcd_on_a_quiet_cluster(results: dict[str, Any]) -> None:
    pinned = medians(results, "quiet")["pinned"]
    assert pinned.cache_lists == 1  # the first list still from the cache
    assert pinned.etcd_fetched >= SIZE  # the Exact list: every pod of the namespace from etcd
    assert pinned.etcd_sent_bytes > results["podBytes"] * SIZE * 0.3  # etcd stores protobuf, smaller than JSON


def test_the_results_page_shows_each_case_against_the_baseline(results: dict[str, Any]) -> None:
    page = render_markdown(results, "python tests/benchmarks/real_drain_cost.py --pods 200")
    assert f"#### {SIZE} pods, active" in page
    assert f"#### {SIZE} pods, quiet" in page
    for case in CASES:
        assert f"| `{case}` |" in page
    assert "--pods 200" in page
