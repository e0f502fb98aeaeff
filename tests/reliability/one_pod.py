"""One TrainJob of one pod on a three-node cluster, running its first execution: the world of the tests that put
one hostile or misbehaving event to the whole simulated cluster (test_hostile.py, test_misbehaving.py), and the
steps they take in it.

Each test builds the state before its point with `do` and `require`: a step that goes otherwise there raises
`Unexpected` (the scenario is broken, an error), never a failed assertion about what dispatch does.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import kubernetes

from airflow_provider_dispatch_lab.scenario.pod_fence import install_pod_fence
from airflow_provider_dispatch_lab.truth.overlap import Overlap

from .callers import Outcome
from .harness import ADMIN, ReliabilityLab
from .schedule import Step
from .world import NAMESPACE, World

#: both callers open the TrainJob, a second apart: the first execution runs
RUNNING = [
    Step.of("open", obj=0, caller=0),
    Step.of("advance", seconds=1),
    Step.of("open", obj=0, caller=1),
    Step.of("advance", seconds=1),
]


class Unexpected(RuntimeError):
    """A step before the point under test went otherwise than the scenario needs: an error, not a failure of
    what the test asserts."""


def require(condition: bool, message: str) -> None:
    if not condition:
        raise Unexpected(message)


def one_pod_world(termination: float, grace: int, *, fenced: bool = False, **params: Any) -> Iterator[World]:
    """The world, its first execution running; its process stops `termination` s after SIGTERM and may take
    `grace` s; `params` are more of the world's (`restart_policy`, ...). With `fenced`, dispatch's pod fence is
    installed before the TrainJob opens (`lab.scenario.pod_fence`). Closed when the generator is."""
    with ReliabilityLab() as rlab:
        built = World(
            rlab, 3, 1, {"num_nodes": (1,), "termination_seconds": termination, "grace_seconds": grace, **params}
        )
        built.setup()
        if fenced:
            install_pod_fence(rlab.api())
        try:
            for step in RUNNING:
                built.apply(step)
            require(built.objects[0].admission == "1", f"the first execution did not start: {built.log}")
            yield built
        finally:
            built.close()


def do(world: World, *steps: Step) -> None:
    """Steps whose own checks are not the point (an expected overlap is asserted by the test itself)."""
    for step in steps:
        world.apply(step)


def _invoke(world: World, operation: str, caller: int) -> Outcome:
    outcomes: list[Outcome] = []
    outcome = world._invoke(caller, operation, world.objects[0], outcomes)
    world.rlab.settle()
    world.refresh()
    return outcome


def release(world: World, caller: int = 0) -> Outcome:
    return _invoke(world, "release", caller)


def hold(world: World, caller: int = 0) -> Outcome:
    return _invoke(world, "hold", caller)


def overlaps(world: World) -> list[Overlap]:
    return world.rlab.sc.overlaps(NAMESPACE, world.objects[0].name)


def only_process(world: World) -> tuple[str, str]:
    """The pod and node of the TrainJob's one running process."""
    running = world._running(world.objects[0])
    require(len(running) == 1, f"expected one running process, not {running}")
    return running[0].pod, running[0].node


def core(world: World, user: str = ADMIN) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(world.rlab.api(user))
