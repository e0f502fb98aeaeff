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

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

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
    object_list,
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


#: `names.MaxGeneratedNameLength`: the Job controller cuts a pod's generateName prefix to this length
MAX_GENERATED_NAME_PREFIX: Final = 58
#: the random suffix the API server appends to a generateName (`names.SimpleNameGenerator`: 5 characters)
_INDEXED_POD_NAME: Final = re.compile(r"(?P<prefix>.+)-(?P<index>0|[1-9][0-9]*)-[bcdfghjklmnpqrstvwxz2456789]{5}")


def indexed_pod_prefix(job_name: str, index: str) -> str:
    """The generateName the Job controller gives an Indexed Job's pod (`podGenerateNameWithIndex`)."""
    tail = f"-{index}-"
    prefix = job_name + tail
    if len(prefix) > MAX_GENERATED_NAME_PREFIX:
        prefix = job_name[: MAX_GENERATED_NAME_PREFIX - len(tail)] + tail
    return prefix


def jobset_job_names(jobset_name: str, replicated_jobs: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    """The child Job names JobSet gives: `<jobset>-<replicatedJob>-<index>` for every replica
    (`kubernetes-sigs/jobset` `placement.GenJobName`); the JobSet is named after the TrainJob (k8s-apis §1.4)."""
    names: list[str] = []
    for job in replicated_jobs:
        replicas = job.get("replicas", 1)
        count = replicas if isinstance(replicas, int) and not isinstance(replicas, bool) and replicas >= 0 else 1
        names.extend(f"{jobset_name}-{job.get('name')}-{index}" for index in range(count))
    return tuple(names)


@dataclass(frozen=True)
class Lineage:
    """The object's pods selected in a way no label edit defeats (fencing.py), for the hold's one full read.

    A pod is the object's when `selection` takes it (its labels), or, unless it carries the jobset-name label of
    another TrainJob, when its controller ownerReference names one of `job_names` (the Jobs JobSet creates,
    `<jobset>-<replicatedJob>-<index>`), or when its name is one the Job controller gives a pod of one of them
    (`<job>-<index>-<5 characters>`, the prefix cut to 58 characters: `podGenerateNameWithIndex`). Names are
    immutable, and the Job controller drops its ownerReference from a pod whose labels no longer match (it
    releases the pod), so the name is what an edit cannot reach. Both take more pods rather than fewer: a pod
    of another TrainJob whose name happens to match and whose labels were removed counts too, and blocks.
    """

    selection: Selection
    job_names: frozenset[str]

    def _owned(self, pod: Mapping[str, Any]) -> bool:
        for reference in object_list(pod, "metadata", "ownerReferences"):
            if reference.get("kind") == "Job" and reference.get("name") in self.job_names:
                return True
        return False

    def _named(self, pod: Mapping[str, Any]) -> bool:
        match = _INDEXED_POD_NAME.fullmatch(name_of(pod))
        if match is None:
            return False
        prefix = name_of(pod)[:-5]
        index = match.group("index")
        return any(prefix == indexed_pod_prefix(job, index) for job in self.job_names)

    def matches(self, pod: Mapping[str, Any]) -> bool:
        if self.selection.matches(pod):
            return True
        if not self.selection.in_namespace(pod):
            return False
        other = labels_of(pod).get(LABEL_JOBSET_NAME)
        if other is not None and other != self.selection.name:
            return False
        return self._owned(pod) or self._named(pod)

    def select(self, *groups: Iterable[Mapping[str, Any]]) -> tuple[Mapping[str, Any], ...]:
        return tuple(pod for pod in union(*groups) if self.matches(pod))
