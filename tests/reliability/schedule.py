"""Random schedules for the reliability model: a pure function from a seed to a list of steps.

Why a seeded generator and not hypothesis' `RuleBasedStateMachine`: one schedule drives a live lab (about ten
simulated controllers on an event loop, real HTTP, two client libraries, threads), at some 0.05-0.3 s of wall
time per step. Hypothesis shrinks by replaying a failing example many times and needs every replay to behave
the same; a live cluster with concurrent callers is reproducible in what is done (this module) and in lab time
(speed 0), but not to the last interleaving of two threads racing for one conditional write, so shrinking would
mostly report `Flaky`, and each replay costs seconds. A seed per schedule gives what shrinking was for: the
failing schedule is printed as its steps and replays from `long_run.py --seed S --schedules 1`, and
`long_run.py --shrink` removes steps while the failure persists.

Each step is drawn without looking at the lab's state (so the list of steps depends on the seed only); its
parameters are indices the world resolves against its state (node 7 of 4 nodes is node 3). A step whose
precondition does not hold then (freeze a node that is powered off) is skipped and counted as such.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: the rules of the invariant run and their weights (how often each is drawn)
RULES: Mapping[str, float] = {
    "open": 3,
    "release": 12,
    "release_lost": 2,
    "hold": 8,
    "hold_then_release": 2,
    "fault": 5,
    "read": 2,
    "advance": 10,
    "freeze": 2,
    "lose": 2,
    "not_ready": 1,
    "recover": 3,
    "power_off": 1,
    "fence": 2,
    "delete_node": 1,
    "add_node": 1,
    "untaint": 1,
    "mistaken_taint": 2,
    "rewrite_patch": 2,
    "complete": 1,
    "fail": 1,
    "reopen": 1,
    # the misbehaving cluster (issue 15 item 4): slow controllers, third parties, long partitions
    "delay": 6,
    "stall": 3,
    "relabel": 4,
    "force_delete": 3,
    "force_delete_stuck": 2,
    "third_party_suspend": 1,
    "third_party_resume": 1,
    "partition": 1,
    "failure_recovery": 2,
    "crafted_name": 1,
    "slow_stop": 2,
}
#: rules that break the operator's precondition; only in the negative control
HOSTILE_RULES: Mapping[str, float] = {"hostile_taint": 3, "hostile_delete_node": 2}
#: rules of Kueue mode (TrainJobs with the queue-name label beside plain ones)
KUEUE_RULES: Mapping[str, float] = {"crash_admission_controller": 2, "preempt": 2}

WRITERS = (0, 1, 2, 3)
READER = 4
IMPATIENT = 5
FAULT_KINDS = ("500", "429", "504", "409", "410", "drop", "hang")
FAULT_TARGETS = ("trainjobs:get", "jobsets:get", "runtimes:get", "pods:list", "nodes:get", "trainjobs:update", "any")
FAULT_OPERATIONS = ("release", "release", "release", "hold", "open", "inspect", "ceased")
READ_OPERATIONS = ("inspect", "ceased", "remaining_pods", "find", "release", "hold")
CRAFTED_OPERATIONS = ("release", "hold", "inspect", "ceased", "remaining_pods", "find")
TAINT_EFFECTS = ("NoExecute", "NoSchedule", "PreferNoSchedule")
FENCE_EFFECTS = ("NoExecute", "NoSchedule")
ADVANCES = (1, 3, 5, 10, 10, 20, 35, 60, 60, 120, 320)
PATCH_VARIANTS = ("alter-dispatch", "rename-dispatch", "foreign-benign", "foreign-forges-labels", "drop-dispatch")
#: controller requests the `delay` rule holds (world.DELAY_TARGETS says which requests each names)
DELAY_TARGETS = (
    "job:create-pods",
    "job:create-pods",
    "job:delete-pods",
    "job:patch-pods",
    "job:status",
    "jobset:create-jobs",
    "jobset:update-jobs",
    "jobset:delete-jobs",
    "jobset:status",
    "trainer:apply",
    "trainer:apply",
    "trainer:status",
    "kubelet:status",
    "scheduler:bind",
    "gc:delete",
)
KUEUE_DELAY_TARGETS = ("kueue:trainjob", "kueue:workload-status", "admission-controller:trainjob")
DELAY_STEPS = (1, 2, 3, 5, 8)
STALL_CHOICES = ("trainer", "jobset", "job", "trainer+jobset", "jobset+job", "all")
RELABEL_VARIANTS = ("dispatch", "jobset", "jobset", "all", "all", "detach")
PARTITION_SECONDS = (310, 330, 400)
STICKY = 0.7
"""How often a step acts on the object the step before it acted on: the misbehaving cluster's classes are short
stories about one object (admitted, disturbed, held, released), which independent draws rarely tell."""


@dataclass(frozen=True)
class Step:
    rule: str
    args: tuple[tuple[str, Any], ...] = ()

    def get(self, name: str, default: Any = None) -> Any:
        return dict(self.args).get(name, default)

    def __str__(self) -> str:
        inner = ", ".join(f"{key}={value!r}" for key, value in self.args)
        return f"{self.rule}({inner})"

    @classmethod
    def of(cls, rule: str, **args: Any) -> Step:
        return cls(rule, tuple(sorted(args.items())))

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.rule, "args": dict(self.args)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Step:
        args = {key: tuple(value) if isinstance(value, list) else value for key, value in data["args"].items()}
        return cls.of(str(data["rule"]), **args)


@dataclass(frozen=True)
class Profile:
    """How schedules are drawn: their length, the world's size and the rules in play."""

    name: str = "ci"
    steps: int = 40
    nodes: int = 4
    objects: int = 2
    hostile: bool = False
    kueue: bool = False
    """Kueue mode: Kueue and dispatch's admission check controller run, odd-numbered TrainJobs are queued."""
    runtime: str = "safe"
    """`safe`: the runtime sets podReplacementPolicy Failed and BlockingRecreate restarts (what dispatch's
    runtime policy asks for); `upstream`: it sets neither (the upstream defaults), which the runtime policy
    refuses unless `accept_risks`."""
    accept_risks: bool = False
    """The callers accept both runtime risks: the negative controls of hazards H1 and H2 (test_model.py)."""
    weights: Mapping[str, float] = field(default_factory=lambda: dict(RULES))
    stories: bool = True
    """Insert the seed's story (`stories.STORIES`) into its schedule: `profile.steps` drawn steps plus the
    story's."""

    def rules(self) -> dict[str, float]:
        rules = dict(self.weights)
        if self.hostile:
            rules.update(HOSTILE_RULES)
        if self.kueue:
            rules.update(KUEUE_RULES)
        return rules

    def options(self) -> dict[str, Any]:
        """What a saved schedule keeps of the profile to replay it (long_run.py)."""
        options: dict[str, Any] = {
            "nodes": self.nodes,
            "objects": self.objects,
            "hostile": self.hostile,
            "kueue": self.kueue,
            "runtime": self.runtime,
        }
        if self.accept_risks:
            options["accept_risks"] = True
        changed = {rule: weight for rule, weight in self.weights.items() if RULES.get(rule) != weight}
        if changed:
            options["weights"] = changed  # what generated the seed's steps (a replay runs the saved steps)
        return options


def _args(rule: str, rng: random.Random, profile: Profile, previous: int) -> dict[str, Any]:
    obj = previous if rng.random() < STICKY else rng.randrange(profile.objects)
    node = rng.randrange(16)
    if rule == "open":
        return {"obj": obj, "caller": rng.choice(WRITERS)}
    if rule == "release":
        count = rng.choice((1, 1, 2, 2, 3))
        return {"obj": obj, "callers": tuple(sorted(rng.sample(WRITERS, count))), "race": rng.random() < 0.4}
    if rule in ("release_lost", "hold"):
        return {"obj": obj, "caller": rng.choice(WRITERS)}
    if rule == "hold_then_release":
        return {"obj": obj, "caller": rng.choice(WRITERS), "callers": tuple(sorted(rng.sample(WRITERS, 2)))}
    if rule == "fault":
        kind = rng.choice(FAULT_KINDS)
        caller = IMPATIENT if kind == "hang" else rng.choice(WRITERS)
        return {
            "obj": obj,
            "caller": caller,
            "kind": kind,
            "target": rng.choice(FAULT_TARGETS),
            "operation": rng.choice(FAULT_OPERATIONS),
        }
    if rule == "read":
        return {"obj": obj, "operation": rng.choice(READ_OPERATIONS)}
    if rule == "slow_stop":
        return {"obj": obj, "pick": rng.randrange(16), "seconds": rng.choice((1, 20, 60))}
    if rule == "crafted_name":
        return {"caller": rng.choice(WRITERS), "operation": rng.choice(CRAFTED_OPERATIONS), "pick": rng.randrange(16)}
    if rule == "advance":
        return {"seconds": rng.choice(ADVANCES)}
    if rule in ("freeze", "lose", "not_ready", "recover", "power_off", "delete_node", "untaint"):
        return {"node": node}
    if rule in ("fence", "hostile_taint"):
        return {"node": node, "effect": rng.choice(FENCE_EFFECTS)}
    if rule == "mistaken_taint":
        return {"node": node, "effect": rng.choice(TAINT_EFFECTS)}
    if rule == "hostile_delete_node":
        return {"node": node}
    if rule == "add_node":
        return {}
    if rule == "rewrite_patch":
        return {"obj": obj, "variant": rng.choice(PATCH_VARIANTS)}
    if rule in ("complete", "fail"):
        return {"obj": obj, "pick": rng.randrange(16)}
    if rule in ("reopen", "third_party_suspend", "third_party_resume", "preempt"):
        return {"obj": obj}
    if rule == "delay":
        targets = DELAY_TARGETS + (KUEUE_DELAY_TARGETS if profile.kueue else ())
        return {"target": rng.choice(targets), "steps": rng.choice(DELAY_STEPS)}
    if rule == "stall":
        return {"controllers": rng.choice(STALL_CHOICES), "steps": rng.choice(DELAY_STEPS[:4])}
    if rule == "relabel":
        return {"obj": obj, "pick": rng.randrange(16), "variant": rng.choice(RELABEL_VARIANTS)}
    if rule == "force_delete_stuck":
        return {"obj": obj, "pick": rng.randrange(16), "seen": True}  # draws nothing: the draws stay as they were
    if rule in ("force_delete", "failure_recovery"):
        return {"obj": obj, "pick": rng.randrange(16)}
    if rule == "partition":
        return {"node": node, "seconds": rng.choice(PARTITION_SECONDS)}
    if rule == "crash_admission_controller":
        return {"steps": rng.choice(DELAY_STEPS)}
    raise ValueError(f"no such rule: {rule}")


def generate(seed: int, profile: Profile) -> list[Step]:
    """The drawn steps of `seed`: `profile.steps` steps, each a rule drawn by weight with its parameters (the
    schedule adds the seed's story: `stories.schedule_of`)."""
    rng = random.Random(seed)
    rules = profile.rules()
    names = sorted(rules)
    weights = [rules[name] for name in names]
    steps = [Step.of("open", obj=index, caller=index % len(WRITERS)) for index in range(profile.objects)]
    previous = 0
    while len(steps) < profile.steps:
        rule = rng.choices(names, weights)[0]
        args = _args(rule, rng, profile, previous)
        previous = int(args.get("obj", previous))
        steps.append(Step.of(rule, **args))
    return steps


def world_parameters(seed: int) -> dict[str, Any]:
    """The parts of a world a schedule does not draw step by step: sizes of objects, how pods stop."""
    rng = random.Random(seed * 7919 + 17)
    return {
        "num_nodes": tuple(rng.choice((1, 2, 2, 3)) for _ in range(8)),
        "termination_seconds": rng.choice((2, 8, 25, 45)),
        "grace_seconds": 30,
        # drawn after the ones above, so that those stay what they were for every seed
        "replicated_jobs": rng.choice((1, 1, 2)),
        "failure_policy": rng.random() < 0.5,
        # the last TrainJob runs on a runtime with upstream's defaults: dispatch's runtime policy must refuse it
        "unsafe_object": rng.random() < 0.35,
        # a failed process replaced by a new pod after the Job's back-off (`Never`) or restarted in place
        "restart_policy": rng.choice(("OnFailure", "OnFailure", "OnFailure", "Never")),
    }
