"""dispatch's Kueue admission check controller (DESIGN §6): the drain check where Kueue asks before it admits.

Kueue owns a queued TrainJob's `spec.suspend` and re-admits it by itself, so in Kueue mode the rule runs in an
admission check: an AdmissionCheck whose `spec.controllerName` is `dispatch.phpboyscout.uk/drained`, required by
the ClusterQueue's `admissionChecksStrategy`. For each Workload owned by a dispatch TrainJob, with quota
reserved and our check Pending, the controller runs the shared rule (`programs.kueue_admit`): while pods of the
previous execution remain it leaves the check Pending, naming them; when none remain it raises A on the
TrainJob (a conditional write, idempotent per Workload admission) and sets the check Ready, and Kueue admits.

Why no controller framework: Kopf, the well-kept Python one, keeps its own state on the objects it handles (by
default the `kopf.zalando.org/last-handled-configuration` annotation and per-handler progress in annotations or
`status.kopf.progress`, kopf.readthedocs.io "Continuity"), which here would be writes to Workloads beyond our
one check entry and permissions the controller must not need; it also brings its own API client and process
model, so the drain check could not share the dispatch adapter's `kubernetes_asyncio` client. The loop here is
the client-go pattern in a few small modules (list+watch with relist on 410, a keyed work queue, per-key jittered
backoff, a periodic resync), and its idempotence rests on the cluster's state, not on a framework's.

Modules, one concern each:

* `workloads`: which Workloads are candidates, their owner, the admission key (pure);
* `verdicts`: what a drain check result means for our entry, and when to look again (pure);
* `status_patch`: the server-side apply of our entry (pure); `checks`: our AdmissionChecks and `Active` (pure);
* `reconciler`: one Workload, end to end; `controller`: informers, work queue, workers, resync, `Active`;
* `informer`, `workqueue`, `waiting`, `api`, `clock`: the watch-and-reconcile machinery (the backoff is the
  package's one schedule, `airflow_provider_dispatch.backoff`);
* `connection`, `runner`, `logs`: the `dispatch admission-controller` process. The same controller inside the
  lab is the lab's (`lab/simulated/kueue/admission_check.py`): the provider never imports the lab.
"""

from __future__ import annotations

from airflow_provider_dispatch.kueue.controller import FIELD_MANAGER, AdmissionController, ControllerOptions

__all__ = ["FIELD_MANAGER", "AdmissionController", "ControllerOptions"]
