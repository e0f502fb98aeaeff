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
    "release": 10,
    "release_lost": 2,
    "hold": 6,
    "hold_then_release": 2,
    "fault": 6,
    "read": 3,
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
    "mistaken_taint": 1,
    "rewrite_patch": 2,
    "complete": 1,
    "fail": 1,
    "reopen": 1,
}
#: rules that break the operator's precondition; only in the negative control
HOSTILE_RULES: Mapping[str, float] = {"hostile_taint": 3, "hostile_delete_node": 2}

WRITERS = (0, 1, 2, 3)
READER = 4
IMPATIENT = 5
FAULT_KINDS = ("500", "429", "504", "409", "410", "drop", "hang")
FAULT_TARGETS = ("trainjobs:get", "jobsets:get", "runtimes:get", "pods:list", "nodes:get", "trainjobs:update", "any")
FAULT_OPERATIONS = ("release", "release", "release", "hold", "open", "inspect", "ceased")
READ_OPERATIONS = ("inspect", "ceased", "remaining_pods", "find", "release", "hold")
TAINT_EFFECTS = ("NoExecute", "NoSchedule", "PreferNoSchedule")
FENCE_EFFECTS = ("NoExecute", "NoSchedule")
ADVANCES = (1, 3, 5, 10, 10, 20, 35, 60, 60, 120, 320)
PATCH_VARIANTS = ("alter-dispatch", "rename-dispatch", "foreign-benign", "foreign-forges-labels", "drop-dispatch")


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
    weights: Mapping[str, float] = field(default_factory=lambda: dict(RULES))

    def rules(self) -> dict[str, float]:
        rules = dict(self.weights)
        if self.hostile:
            rules.update(HOSTILE_RULES)
        return rules


def _args(rule: str, rng: random.Random, profile: Profile) -> dict[str, Any]:
    obj = rng.randrange(profile.objects)
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
    if rule == "reopen":
        return {"obj": obj}
    raise ValueError(f"no such rule: {rule}")


def generate(seed: int, profile: Profile) -> list[Step]:
    """The schedule of `seed`: `profile.steps` steps, each a rule drawn by weight with its parameters."""
    rng = random.Random(seed)
    rules = profile.rules()
    names = sorted(rules)
    weights = [rules[name] for name in names]
    steps = [Step.of("open", obj=index, caller=index % len(WRITERS)) for index in range(profile.objects)]
    while len(steps) < profile.steps:
        rule = rng.choices(names, weights)[0]
        steps.append(Step.of(rule, **_args(rule, rng, profile)))
    return steps


def world_parameters(seed: int) -> dict[str, Any]:
    """The parts of a world a schedule does not draw step by step: sizes of objects, how pods stop."""
    rng = random.Random(seed * 7919 + 17)
    return {
        "num_nodes": tuple(rng.choice((1, 2, 2, 3)) for _ in range(8)),
        "termination_seconds": rng.choice((2, 8, 25, 45)),
        "grace_seconds": 30,
    }
