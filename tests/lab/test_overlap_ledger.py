"""The admission ledger: executions counted from the store's writes, independent of dispatch's pod labels."""

from __future__ import annotations

from typing import Any

from airflow_provider_dispatch.lab.overlap import AdmissionLedger, OverlapRecorder
from airflow_provider_dispatch.lab.store import Store

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
