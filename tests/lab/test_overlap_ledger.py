"""The admission ledger: executions counted from the store's writes, independent of dispatch's pod labels."""

from __future__ import annotations

from typing import Any

from airflow_provider_dispatch_lab.apiserver.storage.store import Store
from airflow_provider_dispatch_lab.truth.overlap import AdmissionLedger, OverlapRecorder

TRAINJOBS = "trainjobs.trainer.kubeflow.org"


def _trainjob(name: str, suspend: bool, admission: int | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": "ml"}
    if admission is not None:
        metadata["annotations"] = {"dispatch.phpboyscout.uk/admission": str(admission)}
    return {"metadata": metadata, "spec": {"suspend": suspend}}


def _pod(name: str, uid: str) -> dict[str, Any]:
    labels = {"jobset.sigs.k8s.io/jobset-name": "tj"}
    return {"metadata": {"name": name, "namespace": "ml", "uid": uid, "labels": labels}}


def test_admissions_are_counted_from_suspend_transitions_whoever_writes_them() -> None:
    store, ledger = Store(), AdmissionLedger()
    store.add_listener(ledger.observe)
    store.put(TRAINJOBS, ("ml", "tj"), _trainjob("tj", suspend=True))
    store.put("pods", ("ml", "early"), _pod("early", "u0"))  # made by hand before any admission
    store.put(TRAINJOBS, ("ml", "tj"), _trainjob("tj", suspend=False, admission=1))  # admission 1 (dispatch)
    store.put("pods", ("ml", "a"), _pod("a", "u1"))
    store.put(TRAINJOBS, ("ml", "tj"), _trainjob("tj", suspend=False, admission=1))  # a label change: no admission
    store.put(TRAINJOBS, ("ml", "tj"), _trainjob("tj", suspend=True, admission=1))  # held
    store.put("pods", ("ml", "late"), _pod("late", "u2"))  # created while held: still the first execution's
    store.put(TRAINJOBS, ("ml", "tj"), _trainjob("tj", suspend=False, admission=1))  # Kueue re-admits, A unchanged
    store.put("pods", ("ml", "b"), _pod("b", "u3"))
    store.remove(TRAINJOBS, ("ml", "tj"))
    store.put(TRAINJOBS, ("ml", "tj"), _trainjob("tj", suspend=False))  # a namesake created running
    store.put("pods", ("ml", "c"), _pod("c", "u4"))

    assert [ledger.execution_of(uid) for uid in ("u0", "u1", "u2", "u3", "u4")] == [None, 1, 1, 2, 3]
    assert [a.admission_annotation for a in ledger.history("ml", "tj")] == ["1", "1", None]


def test_the_recorder_tells_executions_apart_by_the_ledger() -> None:
    store, ledger = Store(), AdmissionLedger()
    store.add_listener(ledger.observe)
    recorder = OverlapRecorder(ledger=ledger)
    same_labels = {"jobset.sigs.k8s.io/jobset-name": "tj", "dispatch.phpboyscout.uk/admission": "1"}
    store.put(TRAINJOBS, ("ml", "tj"), _trainjob("tj", suspend=False))
    store.put("pods", ("ml", "old"), _pod("old", "u1"))
    old = recorder.started(namespace="ml", pod="old", pod_uid="u1", node="n1", labels=same_labels, at=0.0)
    store.put(TRAINJOBS, ("ml", "tj"), _trainjob("tj", suspend=True))
    store.put(TRAINJOBS, ("ml", "tj"), _trainjob("tj", suspend=False))
    store.put("pods", ("ml", "new"), _pod("new", "u2"))
    recorder.started(namespace="ml", pod="new", pod_uid="u2", node="n2", labels=same_labels, at=10.0)
    # Identical identity labels (nothing raised A), yet two admissions ran at once: an overlap.
    (overlap,) = recorder.overlaps("ml", "tj")
    assert (overlap.first.admission, overlap.second.admission) == (1, 2)
    recorder.stopped(old, 5.0)
    assert recorder.overlaps("ml", "tj") == []  # the old process ended before the new one began


def _ranked(name: str, uid: str, index: str, attempt: str = "0") -> dict[str, Any]:
    """A pod as the Job controller creates it for JobSet: rank keys as labels and as annotations."""
    keys = {
        "jobset.sigs.k8s.io/jobset-name": "tj",
        "jobset.sigs.k8s.io/replicatedjob-name": "node",
        "jobset.sigs.k8s.io/job-index": "0",
        "jobset.sigs.k8s.io/restart-attempt": attempt,
        "batch.kubernetes.io/job-completion-index": index,
    }
    return {"metadata": {"name": name, "namespace": "ml", "uid": uid, "labels": dict(keys), "annotations": keys}}


def test_ranks_are_judged_as_the_pods_were_created_whatever_their_labels_say_later() -> None:
    """The widened promise: two processes of one rank (TrainJob, replicated job, job index, pod index) never run
    at once, even within one execution. A pod whose labels were removed before its process started (taken out of
    its controller) still counts as the rank and the TrainJob it was created as."""
    store, ledger = Store(), AdmissionLedger()
    store.add_listener(ledger.observe)
    recorder = OverlapRecorder(ledger=ledger)
    store.put(TRAINJOBS, ("ml", "tj"), _trainjob("tj", suspend=False, admission=1))
    store.put("pods", ("ml", "evicted"), _ranked("evicted", "u1", "0"))
    store.put("pods", ("ml", "replacement"), _ranked("replacement", "u2", "0"))
    store.put("pods", ("ml", "other"), _ranked("other", "u3", "1"))
    first = recorder.started(namespace="ml", pod="evicted", pod_uid="u1", node="n1", labels={}, at=0.0)
    recorder.started(namespace="ml", pod="replacement", pod_uid="u2", node="n2", labels={}, at=10.0)
    recorder.started(namespace="ml", pod="other", pod_uid="u3", node="n3", labels={}, at=10.0)
    assert recorder.overlaps("ml", "tj") == []  # one execution
    (overlap,) = recorder.rank_overlaps("ml", "tj")
    assert {overlap.first.pod, overlap.second.pod} == {"evicted", "replacement"}
    assert "both rank tj/node/0/0" in overlap.describe()
    recorder.stopped(first, 10.0)
    assert recorder.rank_overlaps("ml", "tj") == []


def test_two_restart_attempts_of_one_execution_at_once_are_reported() -> None:
    store, ledger = Store(), AdmissionLedger()
    store.add_listener(ledger.observe)
    recorder = OverlapRecorder(ledger=ledger)
    store.put(TRAINJOBS, ("ml", "tj"), _trainjob("tj", suspend=False, admission=1))
    store.put("pods", ("ml", "old"), _ranked("old", "u1", "0", attempt="0"))
    store.put("pods", ("ml", "new"), _ranked("new", "u2", "1", attempt="1"))
    recorder.started(namespace="ml", pod="old", pod_uid="u1", node="n1", labels={}, at=0.0)
    recorder.started(namespace="ml", pod="new", pod_uid="u2", node="n2", labels={}, at=10.0)
    (overlap,) = recorder.attempt_overlaps("ml", "tj")
    assert "restart attempts 0 and 1" in overlap.describe()
