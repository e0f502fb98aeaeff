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
from collections.abc import Callable, Mapping
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
    """Insert the seed's story (`STORIES`) into its schedule: `profile.steps` drawn steps plus the story's."""

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
    """The schedule of `seed`: `profile.steps` steps, each a rule drawn by weight with its parameters, and the
    seed's story (`tell_story`)."""
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
    return tell_story(seed, steps, profile)


#: lab seconds a story lets pass after a hold before it releases: past dispatch's settle (90 s of server time after
#: the hold was recorded, evidence.py), so that only the drain check and fencing stand between the hold and the
#: admission
PAST_THE_SETTLE = 95


#: lab seconds after a node went silent until a person sees it not Ready: the node lifecycle controller marks it
#: `Unknown` 50 s after it last saw a heartbeat (`--node-monitor-grace-period`), counted from when it saw it, and
#: the kubelet heartbeats every 10 s (in the lab, 60 s was not always enough); a person force-deletes a pod stuck
#: Terminating on a node shown not Ready (`force_delete_stuck` with `seen`)
NODE_MARKED_NOT_READY = 90


def _story_pod(rng: random.Random) -> list[Step]:
    """A story's prelude: its TrainJob running (a release, again a second later as the directed schedules do after
    an open; nothing is written when it already runs), then the one running pod the story is about (`focus`,
    resolved by the world; no cluster action)."""
    return [
        _release(rng),
        Step.of("advance", seconds=1),  # the open's hold observed by Trainer: the settle of an admission at A = 0
        _release(rng),
        Step.of("advance", seconds=5),
        Step.of("focus", obj=STORY_OBJECT, pick=rng.randrange(16)),
    ]


def _release(rng: random.Random) -> Step:
    return Step.of("release", obj=STORY_OBJECT, callers=(rng.choice(WRITERS),), race=False)


def _hold(rng: random.Random) -> Step:
    return Step.of("hold", obj=STORY_OBJECT, caller=rng.choice(WRITERS))


def _silent(rng: random.Random) -> Step:
    """The focused pod's node goes silent with its machine running: a partition (`lose`) or a hung machine."""
    return Step.of(rng.choice(("lose", "freeze")), focus=True)


#: lab seconds a story lets pass at its end so that the processes it left stopping have stopped (the kubelet stops
#: them within the world's 30 s grace): the drawn steps that follow then meet no process in its last seconds on a
#: Ready node, which a force deletion and a release could overlap (outside the promise: docs/reliability.md)
STOPPED = 35


def _fenced(rng: random.Random) -> Step:
    """The operator's procedure for the silent node (machine off, then the out-of-service taint: k8s-apis §5.4).
    It ends the stories that leave pods on a silent node: a partition that heals instead returns a kubelet that
    stops them only then, within their grace, which dispatch cannot see once their objects were force-deleted
    (docs/reliability.md, what a person with rights over pods can still do;
    `schedules/outside/force-deleted-then-node-returned.json`)."""
    return Step.of("fence", focus=True, effect=rng.choice(FENCE_EFFECTS))


def _released_after_the_settle(rng: random.Random) -> list[Step]:
    """A release after the settle, and again after as long once more: a release that finds the object held
    without a record of its execution's pods writes the record (and the settle starts from it), so a caller's
    retry after its `HoldSettlingError` is the release that may admit."""
    return [
        Step.of("advance", seconds=PAST_THE_SETTLE),
        _release(rng),
        Step.of("advance", seconds=PAST_THE_SETTLE),
        _release(rng),
    ]


def story_stuck_pod_force_deleted(rng: random.Random) -> list[Step]:
    """The usual end of a pod stuck Terminating on a node that went silent: after the hold, a person
    force-deletes it (`kubectl delete pod --grace-period=0 --force`, the documented way out for a pod on an
    unreachable node; Kubernetes task "Force Delete StatefulSet Pods"), and a release follows after the settle,
    before the operator fenced the node. The process runs on behind the silent node."""
    return [
        *_story_pod(rng),
        _silent(rng),
        _hold(rng),
        Step.of("advance", seconds=NODE_MARKED_NOT_READY),
        Step.of("force_delete_stuck", obj=STORY_OBJECT, pick=0, focus=True, seen=True),
        *_released_after_the_settle(rng),
        _fenced(rng),
    ]


def story_suspended_outside_then_held(rng: random.Random) -> list[Step]:
    """Issue 15 class 4: while the pod's node is partitioned, a person suspends the TrainJob with a plain patch
    (`kubectl patch trainjob --type merge -p '{"spec":{"suspend":true}}'`, which Trainer honours); dispatch's hold
    then finds it already held; the stuck pod is force-deleted and a release follows after the settle."""
    return [
        *_story_pod(rng),
        Step.of("lose", focus=True),
        Step.of("third_party_suspend", obj=STORY_OBJECT),
        _hold(rng),
        Step.of("advance", seconds=NODE_MARKED_NOT_READY),
        Step.of("force_delete_stuck", obj=STORY_OBJECT, pick=0, focus=True, seen=True),
        *_released_after_the_settle(rng),
        _fenced(rng),
    ]


def story_relabelled_then_silent(rng: random.Random) -> list[Step]:
    """Issue 15 class 1 before the hold: a person removes a running pod's labels to look at it (`kubectl label
    pod ... jobset.sigs.k8s.io/jobset-name-`), then its node goes silent, the TrainJob is held and, after the
    settle, released. Its Job still owns it (its selector labels are left) and deletes it at the suspension, but
    the process runs on behind the silent node."""
    return [
        *_story_pod(rng),
        Step.of("relabel", obj=STORY_OBJECT, pick=0, variant="all", focus=True),
        _silent(rng),
        _hold(rng),
        Step.of("advance", seconds=PAST_THE_SETTLE),
        _release(rng),
        _fenced(rng),
    ]


def story_failure_recovery(rng: random.Random) -> list[Step]:
    """Kueue's failure recovery on a pod of a held execution stuck on an unreachable node (`failure_recovery`:
    Failed after a minute, without proof that its containers stopped), then a release after the settle. Then the
    partition heals (`recover` of a lost machine: its processes ran on), someone taints the node, now Ready,
    `out-of-service` by mistake, and a release follows at once, while the kubelet, back, is still stopping the
    processes of the pods it finds deleted."""
    return [
        *_story_pod(rng),
        Step.of("lose", focus=True),
        _hold(rng),
        Step.of("failure_recovery", obj=STORY_OBJECT, pick=0, focus=True),
        Step.of("advance", seconds=PAST_THE_SETTLE),
        _release(rng),
        Step.of("recover", focus=True),
        Step.of("mistaken_taint", focus=True, effect=rng.choice(TAINT_EFFECTS)),
        _release(rng),
        Step.of("advance", seconds=STOPPED),
    ]


def story_slow_stop_relabelled_after_the_hold(rng: random.Random) -> list[Step]:
    """Issue 15 class 1 after the hold, on a Ready node: in a world whose runtime gives pods a grace longer than
    the settle (`LONG_GRACE`; a checkpoint flushed on SIGTERM, as elastic training does), the pods of one node
    take 120 s to stop; the TrainJob is held and, while those pods are Terminating, a person removes their labels
    (`kubectl label pod ... jobset.sigs.k8s.io/jobset-name-`); a release follows after the settle, before
    they stopped."""
    return [
        *_story_pod(rng),
        Step.of("slow_stop", obj=STORY_OBJECT, pick=0, seconds=SLOW_STOP_SECONDS, focus=True),
        _hold(rng),
        Step.of("relabel", obj=STORY_OBJECT, pick=0, variant="all", focus=True),
        Step.of("advance", seconds=PAST_THE_SETTLE),
        _release(rng),
        Step.of("advance", seconds=SLOW_STOP_SECONDS - PAST_THE_SETTLE + 5),
    ]


def story_partitioned_on_an_upstream_runtime(rng: random.Random) -> list[Step]:
    """Hazard H1 (issue 15 class 5), in a world whose last TrainJob runs on a runtime with upstream's
    `podReplacementPolicy` and no failure policy (story parameters): its releases, which the runtime policy must
    refuse; if one admits, a partition of a node of its execution for 400 s (taint eviction after the 300 s
    toleration, then the Job controller's replacement beside the evicted pod)."""
    last = {"obj": LAST_OBJECT}
    return [
        Step.of("release", **last, callers=(rng.choice(WRITERS),), race=False),
        Step.of("advance", seconds=1),
        Step.of("release", **last, callers=(rng.choice(WRITERS),), race=False),
        Step.of("advance", seconds=5),
        Step.of("focus", **last, pick=rng.randrange(16)),
        Step.of("partition", focus=True, seconds=400),
    ]


def story_restarted_beside_a_lost_node(rng: random.Random) -> list[Step]:
    """Hazard H2 (issue 15 class 6), in a world whose last TrainJob runs on a runtime with two replicated jobs, a
    failure policy and upstream's `restartStrategy` (`Recreate`; story parameters): its releases, which the
    runtime policy must refuse; if one admits, the launcher's node is cut off and the trainer's process fails,
    so that the JobSet restarts while the old launcher Job is held by its pod Terminating on the lost node."""
    last = {"obj": LAST_OBJECT}
    return [
        Step.of("release", **last, callers=(rng.choice(WRITERS),), race=False),
        Step.of("advance", seconds=1),
        Step.of("release", **last, callers=(rng.choice(WRITERS),), race=False),
        Step.of("advance", seconds=5),
        Step.of("focus", **last, pick=0, rjob="launcher"),
        Step.of("lose", focus=True),
        Step.of("fail", **last, pick=rng.randrange(16), rjob="node"),
        Step.of("advance", seconds=20),
        Step.of("advance", seconds=20),
    ]


def templated_name(rng: random.Random) -> Step:
    """A DAG's templated reference or job id rendered from a user's input (`crafted_name`): a name that is not one
    token of its grammar, which must be refused before any request. Every schedule's story is followed by one:
    the rule is drawn at weight 1 of 91, and CI's first 8 schedules happen to draw it none. It costs no lab time
    and no request."""
    return Step.of(
        "crafted_name", caller=rng.choice(WRITERS), operation=rng.choice(CRAFTED_OPERATIONS), pick=rng.randrange(16)
    )


#: the grace period (terminationGracePeriodSeconds) of a world whose story needs pods that outlive the settle on
#: a Ready node (`STORY_PARAMETERS`), and how long their processes then take to stop
LONG_GRACE = 150
SLOW_STOP_SECONDS = 120

#: the stories (issue 15 item 5: the mutation gate's survivors), each a short scripted sequence of the model's own
#: moves on one TrainJob and one of its pods, in order; schedule `seed` tells story `seed % len(STORIES)`, so that
#: any run of that many consecutive seeds tells every story once
STORIES: Mapping[str, Callable[[random.Random], list[Step]]] = {
    "stuck-pod-force-deleted": story_stuck_pod_force_deleted,
    "suspended-outside-then-held": story_suspended_outside_then_held,
    "relabelled-then-silent": story_relabelled_then_silent,
    "failure-recovery": story_failure_recovery,
    "slow-stop-relabelled-after-the-hold": story_slow_stop_relabelled_after_the_hold,
    "partitioned-on-an-upstream-runtime": story_partitioned_on_an_upstream_runtime,
    "restarted-beside-a-lost-node": story_restarted_beside_a_lost_node,
}
#: world parameters a story needs (world_parameters draws grace_seconds 30 for every world)
STORY_PARAMETERS: Mapping[str, Mapping[str, Any]] = {
    "slow-stop-relabelled-after-the-hold": {"grace_seconds": LONG_GRACE},
    "partitioned-on-an-upstream-runtime": {"unsafe_object": True, "unsafe_risk": "pod-replacement"},
    "restarted-beside-a-lost-node": {
        "unsafe_object": True,
        "unsafe_risk": "jobset-restart",
        "failure_policy": True,
        "replicated_jobs": 2,
    },
}
#: the TrainJob stories act on: the first (the last may run on the unsafe runtime, odd ones are queued in Kueue mode)
STORY_OBJECT = 0
#: the last TrainJob of a world of two (the CI profile's), the one `unsafe_object` puts on upstream's runtime
LAST_OBJECT = 1


def story_of(seed: int) -> tuple[str, random.Random]:
    """The story schedule `seed` tells and the random stream of its own it draws from (derived from the seed, so
    that the rules' own draws stay what they were)."""
    names = sorted(STORIES)
    return names[seed % len(names)], random.Random(seed * 104729 + 31)


def story_parameters(seed: int, profile: Profile) -> dict[str, Any]:
    """The world parameters the seed's story needs (`STORY_PARAMETERS`): they apply to a generated schedule only
    (a saved schedule keeps its own `params`)."""
    if not profile.stories:
        return {}
    return dict(STORY_PARAMETERS.get(story_of(seed)[0], {}))


def tell_story(seed: int, steps: list[Step], profile: Profile) -> list[Step]:
    """`steps` with the seed's story inserted, whole, right after the opening steps (where its TrainJob was just
    opened on Ready nodes, so that its preconditions hold; the drawn steps then act on the world it leaves), then
    a `templated_name`; unchanged when the profile tells no stories."""
    if not profile.stories:
        return steps
    name, rng = story_of(seed)
    at = profile.objects
    return [*steps[:at], *STORIES[name](rng), templated_name(rng), *steps[at:]]


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
    }
