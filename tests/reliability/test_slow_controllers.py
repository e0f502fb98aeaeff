"""Slow controllers in the lab (lab/apiserver/delays.py) as upstream's controllers meet them: what each does when its
request is held in the API server and then applied late, or abandoned after the request timeout."""

from __future__ import annotations

import kubernetes

from airflow_provider_dispatch_lab.apiserver.delays import DelayRule

from .harness import ReliabilityLab
from .schedule import Step
from .world import NAMESPACE, TRAINER, World

ONE_POD = {
    "num_nodes": (1,),
    "termination_seconds": 8,
    "grace_seconds": 30,
    "replicated_jobs": 1,
    "failure_policy": False,
}
RUNNING = [
    Step.of("open", obj=0, caller=0),
    Step.of("advance", seconds=1),
    Step.of("open", obj=0, caller=1),
    Step.of("advance", seconds=1),
    Step.of("open", obj=0, caller=2),
]


def test_trainer_reports_suspended_although_its_apply_of_the_jobset_failed() -> None:
    """Upstream Trainer keeps the error of `reconcileObjects` and writes the TrainJob's status anyway
    (`trainjob_controller.go` `Reconcile`, `errors.Join`): when its apply of the suspended JobSet is abandoned by
    the API server (held past the 60 s request timeout: 504, not applied), the TrainJob says `Suspended=True`
    while the JobSet still runs. dispatch's JobSet check is what refuses then."""
    with ReliabilityLab() as rlab:
        world = World(rlab, 3, 1, dict(ONE_POD)).setup()
        try:
            for step in RUNNING:
                world.apply(step)
            applies = DelayRule("dispatch-lab/trainer-controller", frozenset({"patch"}), frozenset({"jobsets"}))
            applies.count = None  # every apply, the retries too
            rlab.lab.call(lambda: rlab.delays.add(applies))
            world.apply(Step.of("hold", obj=0, caller=0))
            world.apply(Step.of("advance", seconds=61))  # the held apply times out: 504, not applied
            outcomes = rlab.lab.call(lambda: [r.outcome for r in rlab.delays.requests])
            assert outcomes[0] == "timed out", outcomes
            custom = kubernetes.client.CustomObjectsApi(rlab.api())
            trainjob = custom.get_namespaced_custom_object(*TRAINER, NAMESPACE, "trainjobs", "tj-a")
            jobset = custom.get_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", NAMESPACE, "jobsets", "tj-a")
            suspended = next(c for c in trainjob["status"]["conditions"] if c["type"] == "Suspended")
            assert (suspended["status"], jobset["spec"].get("suspend")) == ("True", False)
            world.apply(Step.of("release", obj=0, callers=(1,), race=False))
            assert world.stats["release SuspensionNotObservedError"] == 1, world.log[-3:]
            rlab.lab.call(rlab.delays.clear)
            world.apply(Step.of("advance", seconds=1))
            assert world.violations == [], world.violations
        finally:
            world.close()
