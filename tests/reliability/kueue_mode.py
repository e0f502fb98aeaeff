"""Kueue mode in the model: queued TrainJobs beside plain ones, Kueue, and dispatch's admission check controller.

With the profile's `kueue` set, the lab also runs Kueue (`lab.simulated.kueue`), one ClusterQueue with a
LocalQueue in the model's namespace and one AdmissionCheck of dispatch's controller, and the controller itself
(`lab.simulated.kueue.admission_check.LabAdmissionController`, on the lab clock, as an identity of its own so that
its writes are told apart). Odd-numbered TrainJobs carry the queue-name label: Kueue suspends and admits them,
dispatch's callers hold and release them by deactivating and reactivating their Workloads (DESIGN §6), and the
controller raises A once per Workload admission after the drain check.

The moves of this mode:

* `crash_admission_controller`: the controller is killed where it stands (a cancel, as a SIGKILL; the request
  it was making may or may not have been applied) and started again from nothing but the cluster's state a few
  steps later;
* `preempt`: a queued TrainJob's Workload is evicted as Kueue's preemptor evicts it for a higher-priority
  Workload (`KueueScenario.preempt`, reason `Preempted`, `lab/simulated/kueue/preemption.py`): Kueue suspends
  the TrainJob, releases the quota once no Job is active (while pods may still terminate) and admits it again,
  through dispatch's check.

The invariants are those of plain mode, with Kueue's roles (invariants.py): Kueue unsuspends, dispatch's
controller raises A while the TrainJob is suspended, and every Kueue admission follows a raise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kueue.support import RunningController

from airflow_provider_dispatch.backoff import BackoffSchedule
from airflow_provider_dispatch.kueue.controller import ControllerOptions
from airflow_provider_dispatch_lab.scenario.kueue import ScenarioError, SyncKueueScenario
from airflow_provider_dispatch_lab.simulated.cluster import ControllerFactory
from airflow_provider_dispatch_lab.simulated.kueue import KUEUE_CONTROLLERS

from . import invariants
from .callers import Outcome
from .harness import ADMISSION_CONTROLLER, CLUSTER, token_of

if TYPE_CHECKING:
    from .world import ObjectModel, World

CONTROLLERS: Sequence[ControllerFactory] = (*CLUSTER, *KUEUE_CONTROLLERS)
CLUSTER_QUEUE = "rel-cq"
LOCAL_QUEUE = "rel-lq"
CHECK = "rel-drained"
NAMESPACE = "rel"
OPTIONS = ControllerOptions(
    check_names=frozenset({CHECK}), seed=7, resync_seconds=30.0, refused_backoff=BackoffSchedule(5.0, 20.0)
)


@dataclass
class KueueMode:
    """The Kueue part of a world: its queues, the admission check controller, and its crash."""

    controller: RunningController | None = None
    down_for: int = 0
    """Steps until the crashed controller starts again (0: it runs)."""
    kueue: SyncKueueScenario | None = None

    def setup(self, world: World) -> None:
        lab = world.rlab.lab
        self.kueue = SyncKueueScenario(lab)
        self.kueue.create_queues(
            NAMESPACE,
            cluster_queue=CLUSTER_QUEUE,
            local_queue=LOCAL_QUEUE,
            admission_checks=(CHECK,),
            activate_checks=False,
            cpu="64",
            memory="256Gi",
        )
        for obj in world.objects:
            if obj.index % 2 == 1:
                obj.queue = LOCAL_QUEUE
        self.controller = RunningController(lab, OPTIONS, token_of(ADMISSION_CONTROLLER)).start()

    def close(self) -> None:
        if self.controller is not None:
            self.controller.kill()
        if self.kueue is not None:
            self.kueue.close()

    def tick(self, world: World) -> None:
        """Before each step: a crashed controller whose time has come starts again."""
        if self.down_for <= 0:
            return
        self.down_for -= 1
        if self.down_for == 0:
            self._start(world)

    def _start(self, world: World) -> None:
        assert self.controller is not None
        self.controller.start()
        world.stats["admission controller restarts"] += 1
        world.rlab.settle()

    def crash(self, world: World, steps: int) -> bool:
        if self.controller is None or self.down_for > 0:
            return False
        self.controller.kill()
        self.down_for = max(steps, 1)
        world.stats["admission controller crashes"] += 1
        return True

    def recover(self, world: World) -> None:
        """At the end: a crashed controller runs again."""
        if self.down_for > 0:
            self.down_for = 0
            self._start(world)

    def preempt(self, world: World, obj: ObjectModel) -> bool:
        if obj.queue is None or not obj.exists or self.kueue is None:
            return False
        try:
            workload = self.kueue.workload_for(NAMESPACE, obj.name)
            if workload is None:
                return False
            self.kueue.preempt(NAMESPACE, str(workload["metadata"]["name"]))
        except ScenarioError:
            return False
        world.stats["preemptions"] += 1
        return True

    def converge_one(self, world: World, obj: ObjectModel, outcomes: list[Outcome], attempts: int) -> list[str]:
        """Hold (Workload inactive), let lab time pass, release (active again): Kueue must admit it once more,
        through dispatch's check (A+1), within `attempts` rounds of 10 s of lab time."""
        world.hold_until_accepted(obj, outcomes, attempts)
        world._advance(30)
        world.refresh()
        before = invariants._number(obj.admission)
        admissions = len(world.rlab.book.admissions(NAMESPACE, obj.name))
        release = world._invoke(0, "release", obj, outcomes)
        world.rlab.settle()
        for _ in range(attempts):
            world.refresh()
            if obj.finished:
                world.stats["converged (finished)"] += 1
                return []
            now = world.rlab.book.admissions(NAMESPACE, obj.name)
            if len(now) > admissions and obj.suspended is False:
                world.stats["converged"] += 1
                if before is None or now[-1].new_admission != str(before + 1):
                    return [f"{obj.ref}: Kueue admitted it with A={now[-1].new_admission} after A={before}"]
                return []
            if release.error is not None:
                release = world._invoke(0, "release", obj, outcomes)
                world.rlab.settle()
            world._advance(10)
        return [
            f"{obj.ref}: Kueue did not admit it again within {attempts} rounds of 10 s after the release "
            f"(nothing may be lost); A={obj.admission}, suspend={obj.suspended}, release: {release.describe()}"
        ]
