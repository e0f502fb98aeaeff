"""What the simulated container process of a pod does: the lab's workload annotations.

A test or the demo puts these annotations on a pod (usually through the pod template of a runtime or a runtime
patch, so every pod of a TrainJob gets them). They are the lab's own contract, not Kubernetes: the values are
what a real training process would do by itself.

| annotation (prefix `lab.dispatch.phpboyscout.uk/`) | meaning | default |
|---|---|---|
| `run-seconds` | lab seconds the process runs before it exits by itself | absent: runs until stopped |
| `exit-code` | the exit code when it exits by itself (0 = success) | 0 |
| `termination-seconds` | lab seconds it takes to stop after SIGTERM; past the grace period the kubelet kills it | 0 |
| `sigterm-exit-code` | the exit code when it stops on SIGTERM in time | 143 (128 + SIGTERM) |
| `start-seconds` | lab seconds from the kubelet accepting the pod to the process running (image pull, start) | 0 |
| `exit-now` | a control: the running process exits now with this code (0-255) | absent |
| `exit-code-by-admission` | `A=code,...`: the exit code when the pod's admission label is A | absent |
| `exit-code-by-submission` | `S=code,...`: the same, keyed by the pod's submission label | absent |

The labels are dispatch's (`dispatch.phpboyscout.uk/admission`, `.../submission`, put on the pods by its runtime
patch). The two `exit-code-by-*` knobs are a lab-only behaviour, with no Kubernetes counterpart: they let one runtime
(whose pod template carries the annotation for every execution) fail on one execution and succeed on a later
one, which is what a chained restart rehearses (a flaky first run, a good second). The exit code of a process
that exits by itself is the first that applies: `exit-code-by-admission` for the pod's admission label, then
`exit-code-by-submission` for its submission label, then `exit-code`. A pod without those labels (one dispatch
did not admit) gets `exit-code`.

A process killed at the grace deadline exits 137 (128 + SIGKILL), as a container runtime reports it.

Bad values are refused when the pod is written (`WorkloadAnnotationAdmission`, a validating admission plugin the
kubelet manager registers), with a 422 naming the annotation, so a typo never silently becomes "run forever".
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_dispatch.dispatch.vocabulary import LABEL_SUBMISSION, POD_LABEL_ADMISSION
from airflow_provider_dispatch_lab.apiserver.errors import invalid
from airflow_provider_dispatch_lab.apiserver.registry.admission import AdmissionRequest, Operation
from airflow_provider_dispatch_lab.apiserver.registry.resources import ResourceType

LAB_PREFIX = "lab.dispatch.phpboyscout.uk/"
RUN_SECONDS = LAB_PREFIX + "run-seconds"
EXIT_CODE = LAB_PREFIX + "exit-code"
TERMINATION_SECONDS = LAB_PREFIX + "termination-seconds"
SIGTERM_EXIT_CODE = LAB_PREFIX + "sigterm-exit-code"
START_SECONDS = LAB_PREFIX + "start-seconds"
EXIT_NOW = LAB_PREFIX + "exit-now"
EXIT_CODE_BY_ADMISSION = LAB_PREFIX + "exit-code-by-admission"
EXIT_CODE_BY_SUBMISSION = LAB_PREFIX + "exit-code-by-submission"
#: which pod label each `exit-code-by-*` knob is keyed by, in the order they apply
EXIT_CODE_KEYS = ((EXIT_CODE_BY_ADMISSION, POD_LABEL_ADMISSION), (EXIT_CODE_BY_SUBMISSION, LABEL_SUBMISSION))

EXIT_SIGTERM = 143
EXIT_SIGKILL = 137


class WorkloadError(ValueError):
    """A workload annotation with a value the lab cannot read; `annotation` names it."""

    def __init__(self, annotation: str, value: str, expected: str) -> None:
        super().__init__(f"annotation {annotation}: {value!r} is not {expected}")
        self.annotation = annotation


def annotation_seconds(annotations: Mapping[str, str], key: str) -> float | None:
    """The lab-seconds annotation `key` (a finite number, 0 or more), None when absent; `WorkloadError` when
    unreadable. The workload annotations and the fencing agent's `fence-after-seconds` are read by this one rule;
    what to do with the error is the caller's: a pod with a bad value is refused when written, a node's is logged by
    the fencing agent, which then leaves the node alone."""
    raw = annotations.get(key)
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise WorkloadError(key, raw, "a number of seconds (0 or more)")
    return value


def _exit_code(annotations: Mapping[str, str], key: str) -> int | None:
    raw = annotations.get(key)
    if raw is None:
        return None
    if not raw.strip().isdigit() or not 0 <= int(raw) <= 255:
        raise WorkloadError(key, raw, "an exit code from 0 to 255")
    return int(raw)


def _exit_codes_by_label(annotations: Mapping[str, str], key: str) -> dict[str, int]:
    """`value=code,...` (spaces allowed around each part) as {label value: exit code}; {} when absent."""
    raw = annotations.get(key)
    if raw is None:
        return {}
    expected = "a list of label-value=exit-code pairs (codes 0 to 255), such as 1=1,2=0"
    codes: dict[str, int] = {}
    for part in raw.split(","):
        value, sep, code = (piece.strip() for piece in part.partition("="))
        if not sep or not value or not code.isdigit() or not 0 <= int(code) <= 255 or value in codes:
            raise WorkloadError(key, raw, expected)
        codes[value] = int(code)
    if not codes:
        raise WorkloadError(key, raw, expected)
    return codes


def _exit_code_for(annotations: Mapping[str, str], labels: Mapping[str, str], default: int) -> int:
    """The exit code of a process that exits by itself: the first `exit-code-by-*` knob that names the pod's
    label value, else `default` (the `exit-code` annotation). Every knob is parsed, so a bad one is refused even
    when an earlier one applies."""
    chosen: int | None = None
    for annotation, label in EXIT_CODE_KEYS:
        codes = _exit_codes_by_label(annotations, annotation)
        value = labels.get(label)
        if chosen is None and value is not None and value in codes:
            chosen = codes[value]
    return default if chosen is None else chosen


@dataclass(frozen=True)
class WorkloadSpec:
    run_seconds: float | None = None
    exit_code: int = 0
    termination_seconds: float = 0.0
    sigterm_exit_code: int = EXIT_SIGTERM
    start_seconds: float = 0.0
    exit_now: int | None = None

    @classmethod
    def from_annotations(cls, annotations: Mapping[str, str], labels: Mapping[str, str] | None = None) -> WorkloadSpec:
        """Raises WorkloadError for a value it cannot read. `labels` (the pod's) choose an `exit-code-by-*`."""
        exit_code = _exit_code_for(annotations, labels or {}, _exit_code(annotations, EXIT_CODE) or 0)
        termination = annotation_seconds(annotations, TERMINATION_SECONDS)
        sigterm = _exit_code(annotations, SIGTERM_EXIT_CODE)
        start = annotation_seconds(annotations, START_SECONDS)
        return cls(
            run_seconds=annotation_seconds(annotations, RUN_SECONDS),
            exit_code=exit_code,
            termination_seconds=0.0 if termination is None else termination,
            sigterm_exit_code=EXIT_SIGTERM if sigterm is None else sigterm,
            start_seconds=0.0 if start is None else start,
            exit_now=_exit_code(annotations, EXIT_NOW),
        )

    @classmethod
    def of_pod(cls, pod: Mapping[str, Any]) -> WorkloadSpec:
        metadata = pod.get("metadata") or {}
        annotations = metadata.get("annotations") or {}
        labels = metadata.get("labels") or {}
        return cls.from_annotations(
            {str(k): str(v) for k, v in annotations.items()}, {str(k): str(v) for k, v in labels.items()}
        )


class WorkloadAnnotationAdmission:
    """Refuses a pod whose workload annotations cannot be read (a 422 Invalid on the annotation)."""

    name = "lab-workload-annotations"

    def handles(self, resource: ResourceType, subresource: str | None, operation: Operation) -> bool:
        return resource.group == "" and resource.kind == "Pod" and subresource is None and operation != "DELETE"

    async def mutate(self, request: AdmissionRequest) -> None:
        return None

    async def validate(self, request: AdmissionRequest) -> None:
        if request.obj is None:
            return
        try:
            WorkloadSpec.of_pod(request.obj)
        except WorkloadError as error:
            cause = {"reason": "FieldValueInvalid", "field": f"metadata.annotations[{error.annotation}]"}
            raise invalid("Pod", "", request.name, [{**cause, "message": str(error)}]) from error
