"""The Workload Kueue makes for a TrainJob: its name and the metadata that ties it to the job.

`pkg/controller/jobframework/workload_names.go` `GetWorkloadNameForOwnerWithGVK`: `<kind lowercased>-<name>`,
truncated to 253 - 6 characters, then `-` and the first 5 hex digits of
`sha1("<Kind>\\n<group>\\n<name>\\n<uid>")` (the `ShortWorkloadNames` gate, alpha and off, would cut to 63).
`reconciler.go` `constructWorkload`: label `kueue.x-k8s.io/job-uid` (when the UID is a valid label value),
finalizer `kueue.x-k8s.io/resource-in-use`, and a controller ownerRef (`SetControllerReference`).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from airflow_provider_dispatch_lab.simulated.kueue import constants as k

Obj = dict[str, Any]

_HASH_LENGTH = 5
_MAX_NAME = 253
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def workload_name(owner_name: str, owner_uid: str, kind: str = k.TRAINJOB_KIND, group: str = k.TRAINER_GROUP) -> str:
    digest = hashlib.sha1(f"{kind}\n{group}\n{owner_name}\n{owner_uid}".encode()).hexdigest()
    prefix = f"{kind.lower()}-{owner_name}"[: _MAX_NAME - 1 - _HASH_LENGTH]
    return f"{prefix}-{digest[:_HASH_LENGTH]}"


def owner_reference(trainjob: Obj) -> Obj:
    meta = trainjob["metadata"]
    return {
        "apiVersion": k.TRAINER_API_VERSION,
        "kind": k.TRAINJOB_KIND,
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def is_controlled_by(obj: Obj, owner_uid: str) -> bool:
    return any(
        ref.get("controller") is True and ref.get("uid") == owner_uid
        for ref in (obj.get("metadata") or {}).get("ownerReferences") or ()
    )


def workload_labels(trainjob: Obj) -> dict[str, str]:
    """No TrainJob label is copied (`labelKeysToCopy` is empty by default); the job UID is, if it can be."""
    uid = str(trainjob["metadata"].get("uid", ""))
    return {k.JOB_UID_LABEL: uid} if len(uid) <= 63 and _LABEL_VALUE.match(uid) else {}
