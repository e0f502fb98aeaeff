"""The two independent selections of an object's pods, and their union (DESIGN §3.3).

1. labels `dispatch.phpboyscout.uk/job-id` AND `dispatch.phpboyscout.uk/submission` equal to the TrainJob's
   (these reach the pods only through the dispatch runtime patch);
2. label `jobset.sigs.k8s.io/jobset-name` equal to the TrainJob's name (JobSet puts it on every pod, and the
   JobSet's name is the TrainJob's: k8s-apis §1.4, §2.1; it is also Kueue's own pod selector for a TrainJob).

The second exists so that a rewritten or removed runtime patch cannot hide pods; the first so that pods which
somehow lost the JobSet label are still found. A pod is the object's if either selection takes it. The union
is keyed by pod uid, or by namespace/name when a uid is absent (never by position), so one pod selected twice
counts once and two pods never collapse into one.

Only pods in the TrainJob's namespace count. A pod without `metadata.namespace` is taken as being in the
listed namespace: it came from a namespace-scoped list, and dropping it could hide a running pod.

The same predicates serve both read paths: `selectors` are the server-side label selectors (built only from
validated values, so each is exactly two or one equality terms), and `matches` is the local matcher for a
namespace-wide list. Server-side results are filtered locally again, so a server that ignored the selector
cannot widen or alter the selection.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_dispatch.dispatch.validation import (
    validate_job_id,
    validate_namespace,
    validate_submission,
    validate_trainjob_name,
)
from airflow_provider_dispatch.dispatch.vocabulary import (
    LABEL_JOB_ID,
    LABEL_JOBSET_NAME,
    LABEL_SUBMISSION,
    field,
    labels_of,
    name_of,
    namespace_of,
)


def pod_key(pod: Mapping[str, Any]) -> str:
    """The identity of a pod for the union: its uid, else namespace/name."""
    uid = field(pod, "metadata", "uid")
    if isinstance(uid, str) and uid:
        return f"uid:{uid}"
    return f"name:{namespace_of(pod)}/{name_of(pod)}"


def union(*groups: Iterable[Mapping[str, Any]]) -> tuple[Mapping[str, Any], ...]:
    """All pods of all groups, each once, in first-seen order."""
    seen: dict[str, Mapping[str, Any]] = {}
    for group in groups:
        for pod in group:
            seen.setdefault(pod_key(pod), pod)
    return tuple(seen.values())


@dataclass(frozen=True)
class Selection:
    """Which pods belong to one TrainJob. `job_id`/`submission` None: select by jobset-name only."""

    namespace: str
    name: str
    job_id: str | None
    submission: str | None

    def __post_init__(self) -> None:
        ref = f"{self.namespace}/{self.name}"
        validate_namespace(self.namespace, ref=ref)
        validate_trainjob_name(self.name, ref=ref)
        if (self.job_id is None) != (self.submission is None):
            raise ValueError("job_id and submission are given together or not at all")
        if self.job_id is not None:
            validate_job_id(self.job_id, ref=ref)
            validate_submission(self.submission, ref=ref)

    @property
    def dispatch_selector(self) -> str | None:
        """`job-id=<id>,submission=<s>`, or None when the object's labels are unknown."""
        if self.job_id is None:
            return None
        return f"{LABEL_JOB_ID}={self.job_id},{LABEL_SUBMISSION}={self.submission}"

    @property
    def jobset_selector(self) -> str:
        return f"{LABEL_JOBSET_NAME}={self.name}"

    @property
    def selectors(self) -> tuple[str, ...]:
        """The server-side label selectors, one list each; the union of their results is the selection."""
        dispatch = self.dispatch_selector
        return (self.jobset_selector,) if dispatch is None else (dispatch, self.jobset_selector)

    def in_namespace(self, pod: Mapping[str, Any]) -> bool:
        namespace = field(pod, "metadata", "namespace")
        return namespace is None or namespace == self.namespace

    def matches_dispatch_labels(self, pod: Mapping[str, Any]) -> bool:
        if self.job_id is None:
            return False
        pod_labels = labels_of(pod)
        return pod_labels.get(LABEL_JOB_ID) == self.job_id and pod_labels.get(LABEL_SUBMISSION) == self.submission

    def matches_jobset_name(self, pod: Mapping[str, Any]) -> bool:
        return labels_of(pod).get(LABEL_JOBSET_NAME) == self.name

    def matches(self, pod: Mapping[str, Any]) -> bool:
        return self.in_namespace(pod) and (self.matches_dispatch_labels(pod) or self.matches_jobset_name(pod))

    def select(self, *groups: Iterable[Mapping[str, Any]]) -> tuple[Mapping[str, Any], ...]:
        """The object's pods among the given lists (one namespace-wide list, or the per-selector lists)."""
        return tuple(pod for pod in union(*groups) if self.matches(pod))
