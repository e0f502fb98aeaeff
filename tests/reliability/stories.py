"""Stories (issue 15 item 5): short scripted sequences of the model's own rules on one TrainJob, one of its pods
and that pod's node, in order, which independent draws rarely tell (the mutation gate's finding,
docs/reliability.md). Each schedule tells one, inserted after its opening steps and drawn from a random stream of
its own derived from the seed, so that the drawn steps (schedule.generate) stay what they are.

Every story's steps are things real controllers, people or machines do; each story's docstring names the upstream
behaviour it follows.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import Any

from .schedule import CRAFTED_OPERATIONS, FENCE_EFFECTS, TAINT_EFFECTS, WRITERS, Profile, Step, generate

#: the TrainJob stories act on: the first (the last may run on the unsafe runtime, odd ones are queued in Kueue mode)
STORY_OBJECT = 0
#: the last TrainJob of a world of two (the CI profile's), the one `unsafe_object` puts on upstream's runtime
LAST_OBJECT = 1


def schedule_of(seed: int, profile: Profile) -> list[Step]:
    """The schedule of `seed`: the drawn steps (`schedule.generate`) with the seed's story (`tell_story`)."""
    return tell_story(seed, generate(seed, profile), profile)


#: lab seconds a story lets pass after a hold before it releases: past dispatch's settle (90 s of server time after
#: the hold was recorded, evidence.py), so that only the drain check and fencing stand between the hold and the
#: admission
PAST_THE_SETTLE = 95


#: lab seconds after a node went silent until a person sees it not Ready: the node lifecycle controller marks it
#: `Unknown` 50 s after it last saw a heartbeat (`--node-monitor-grace-period`), counted from when it saw it, and
#: the kubelet heartbeats every 10 s (in the lab, 60 s was not always enough); a person force-deletes a pod stuck
#: Terminating on a node shown not Ready (`force_delete_stuck` with `seen`)
NODE_MARKED_NOT_READY = 90


def _started(rng: random.Random, obj: int = STORY_OBJECT) -> list[Step]:
    """A story's prelude: its TrainJob running (a release: nothing is written when it already runs; after the
    opening steps Trainer has observed the open's hold), and 5 s for the scheduler and the kubelets."""
    return [_release(rng, obj), Step.of("advance", seconds=5)]


def _look(
    rng: random.Random, obj: int = STORY_OBJECT, rjob: str | None = None, *, newest: bool = False
) -> tuple[int, int, str | None, bool]:
    """The `focus` of a story's first step about one pod: which running process of TrainJob `obj` (of replicated
    job `rjob`; with `newest`, the one that started last) the story is about, resolved by the world
    (`World.look`); the steps after it say `focus=True`."""
    return (obj, rng.randrange(16), rjob, newest)


def _release(rng: random.Random, obj: int = STORY_OBJECT) -> Step:
    return Step.of("release", obj=obj, callers=(rng.choice(WRITERS),), race=False)


def _hold(rng: random.Random) -> Step:
    return Step.of("hold", obj=STORY_OBJECT, caller=rng.choice(WRITERS))


def _silent(rng: random.Random, focus: object = True) -> Step:
    """The focused pod's node goes silent with its machine running: a partition (`lose`) or a hung machine."""
    return Step.of(rng.choice(("lose", "freeze")), focus=focus)


#: lab seconds a story lets pass at its end so that the processes it left stopping have stopped (the kubelet stops
#: them within the world's 30 s grace): the drawn steps that follow then meet no process in its last seconds on a
#: Ready node, which a force deletion and a release could overlap (outside the promise: docs/reliability.md)
STOPPED = 35


def _fenced(rng: random.Random) -> Step:
    """The operator's procedure for the silent node (machine off, then the out-of-service taint: k8s-apis §5.4).
    It ends the stories that leave pods on a silent node, so that the drawn steps after them start from a world
    whose processes have stopped (`stuck-pod-force-deleted` lets the node return instead)."""
    return Step.of("fence", focus=True, effect=rng.choice(FENCE_EFFECTS))


def _released_after_the_settle(rng: random.Random, waited: int = 0) -> list[Step]:
    """A release after the settle (`waited` seconds have passed since the hold already), and again after as long
    once more: a release that finds the object held without a record of its execution's pods writes the record
    (and the settle starts from it), so a caller's retry after its `HoldSettlingError` is the release that may
    admit."""
    return [
        Step.of("advance", seconds=PAST_THE_SETTLE - waited),
        _release(rng),
        Step.of("advance", seconds=PAST_THE_SETTLE),
        _release(rng),
    ]


#: lab seconds between a silent node's return and the release a story makes then: the kubelet's first status
#: report after the partition (every 10 s) has marked the node Ready again, and its relist has not yet stopped the
#: processes of the pods it finds deleted (it gives them their grace, 30 s in the model's worlds)
JUST_RETURNED = 10


def story_stuck_pod_force_deleted(rng: random.Random) -> list[Step]:
    """The usual end of a pod stuck Terminating on a node that went silent: after the hold, a person
    force-deletes it (`kubectl delete pod --grace-period=0 --force`, the documented way out for a pod on an
    unreachable node; Kubernetes task "Force Delete StatefulSet Pods"), and a release follows after the settle,
    before the operator fenced the node. The process runs on behind the silent node. Then the node comes back
    (the partition heals, or the hung machine resumes) instead of being fenced, and a release follows as soon as
    it is Ready: its kubelet learns of the force deletion only when it relists its pods, and stops the process
    within the pod's grace then (`kubelet.go` `HandlePodRemoves`; fencing.py, the returned node), so a release
    that took the vanished pod as ended because its node is Ready again would admit beside it."""
    return [
        *_started(rng),
        _silent(rng, _look(rng)),
        _hold(rng),
        Step.of("advance", seconds=NODE_MARKED_NOT_READY),
        Step.of("force_delete_stuck", obj=STORY_OBJECT, pick=0, focus=True, seen=True),
        *_released_after_the_settle(rng, waited=NODE_MARKED_NOT_READY),
        Step.of("recover", focus=True),
        Step.of("advance", seconds=JUST_RETURNED),
        _release(rng),
        Step.of("advance", seconds=STOPPED),
    ]


def story_suspended_outside_then_held(rng: random.Random) -> list[Step]:
    """Issue 15 class 4: while the pod's node is partitioned, a person suspends the TrainJob with a plain patch
    (`kubectl patch trainjob --type merge -p '{"spec":{"suspend":true}}'`, which Trainer honours); dispatch's hold
    then finds it already held; the stuck pod is force-deleted and a release follows after the settle."""
    return [
        *_started(rng),
        Step.of("lose", focus=_look(rng)),
        Step.of("third_party_suspend", obj=STORY_OBJECT),
        _hold(rng),
        Step.of("advance", seconds=NODE_MARKED_NOT_READY),
        Step.of("force_delete_stuck", obj=STORY_OBJECT, pick=0, focus=True, seen=True),
        *_released_after_the_settle(rng, waited=NODE_MARKED_NOT_READY),
        _fenced(rng),
    ]


def story_relabelled_then_silent(rng: random.Random) -> list[Step]:
    """Issue 15 class 1 before the hold: a person removes a running pod's labels to look at it (`kubectl label
    pod ... jobset.sigs.k8s.io/jobset-name-`), then its node goes silent, the TrainJob is held and, after the
    settle, released. Its Job still owns it (its selector labels are left) and deletes it at the suspension, but
    the process runs on behind the silent node."""
    return [
        *_started(rng),
        Step.of("relabel", obj=STORY_OBJECT, pick=0, variant="all", focus=_look(rng)),
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
        *_started(rng),
        Step.of("lose", focus=_look(rng)),
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
        *_started(rng),
        Step.of("slow_stop", obj=STORY_OBJECT, pick=0, seconds=SLOW_STOP_SECONDS, focus=_look(rng)),
        _hold(rng),
        Step.of("relabel", obj=STORY_OBJECT, pick=0, variant="all", focus=True),
        Step.of("advance", seconds=PAST_THE_SETTLE),
        _release(rng),
        Step.of("advance", seconds=SLOW_STOP_SECONDS - PAST_THE_SETTLE + 5),
    ]


#: lab seconds after a process failed until its JobSet's restart has started creating the Job again: the Job
#: controller fails the Job at once (`backoffLimit: 0`), JobSet deletes it and waits until its pods are gone (in a
#: world whose processes stop within 8 s of SIGTERM, a story parameter), then creates it; the creation, held,
#: must still be in flight at the hold and the release that follow (the API server answers it 504 after 60 s)
RESTARTED = 50

#: lab seconds part 5 of `in-flight-across-the-hold` lets pass before its release: past the settle of the hold
#: before it, and long enough for PodGC to delete the pods of the node the first telling fenced (its out-of-service
#: taint; PodGC runs every 20 s), so that the release is refused only for what this telling does
BEFORE_THE_CREATION = 120


def _created_across_the_hold(rng: random.Random, variant: str) -> list[Step]:
    """Part 5 of `story_in_flight_across_the_hold`: the pod whose creation lands after the hold loses the labels
    of `variant` (`relabel`, schedule.RELABEL_VARIANTS)."""
    return [
        Step.of("advance", seconds=BEFORE_THE_CREATION),
        Step.of("delay", target="job:create-pods", steps=2),  # caught by the release, landing after the hold
        _release(rng),
        _hold(rng),
        Step.of("relabel", obj=STORY_OBJECT, pick=0, variant=variant, focus=_look(rng, newest=True)),
        # a hung machine: the Job controller deleted the pod when it landed, and a partitioned kubelet would stop
        # its process within its grace all the same
        Step.of("freeze", focus=True),
        *_released_after_the_settle(rng),
        _fenced(rng),
    ]


def _restarted_across_the_hold(rng: random.Random, target: str) -> list[Step]:
    """One restart of `story_in_flight_across_the_hold`: a write of the restart held (`delay target`) across a hold
    and a release at once."""
    return [
        # running (again: the retry of a release refused while the previous hold settled), and for long, so that
        # the settle's shortcut may apply to the hold
        _release(rng),
        Step.of("advance", seconds=PAST_THE_SETTLE),
        _release(rng),
        Step.of("advance", seconds=PAST_THE_SETTLE),
        Step.of("delay", target=target, steps=3),  # caught by the restart, landing after the release
        Step.of("fail", obj=STORY_OBJECT, pick=rng.randrange(16)),
        Step.of("advance", seconds=RESTARTED),
        _hold(rng),
        _release(rng),
        Step.of("advance", seconds=5),
    ]


#: steps a paused Trainer apply stays unsent (`_applied_after_the_next_hold`): across the hold, the settle and the
#: release after it, landing at the step after that release
PAUSED_STEPS = 4


def _applied_after_the_next_hold(rng: random.Random) -> list[Step]:
    """Part 3 of `story_in_flight_across_the_hold`: a held, settled execution is released, and Trainer's apply of
    that release is built and then not sent for minutes (its process paused: `delay trainer:apply-paused`, which
    no request timeout ends); a hold follows at once, and a release after the settle. Trainer reconciles one
    TrainJob at a time (`workqueue`: a key being processed is not handed out again), so it applies nothing of the
    hold meanwhile: the TrainJob's `Suspended` condition, the suspended JobSet and its suspended Jobs are all the
    earlier hold's, and only the JobSet's admission label shows it (evidence.py, 2). The paused apply then lands
    and resumes the JobSet with the released execution's label."""
    return [
        _release(rng),
        Step.of("advance", seconds=PAST_THE_SETTLE),
        # running again (the retry of the release refused while part 2's hold settled), by an admitting write
        # whose answer is lost: the caller's retry finds its own admission (conflicts.py)
        Step.of("release_lost", obj=STORY_OBJECT, caller=rng.choice(WRITERS)),
        Step.of("advance", seconds=5),
        _hold(rng),
        Step.of("advance", seconds=PAST_THE_SETTLE),
        Step.of("delay", target="trainer:apply-paused", steps=PAUSED_STEPS),  # caught by the release's apply
        _release(rng),
        _hold(rng),
        Step.of("advance", seconds=PAST_THE_SETTLE),
        _release(rng),
        Step.of("advance", seconds=5),
    ]


#: steps a `stall jobset` lasts in `_resumed_across_the_hold`: from the release to two steps after the last release
RESUME_STALL_STEPS = 12


def _resumed_across_the_hold(rng: random.Random) -> list[Step]:
    """Part 4 of `story_in_flight_across_the_hold`: a held, settled execution is released while JobSet's writes
    queue in the API server (`stall jobset`: API Priority and Fairness, a slow webhook; each answered 504 after
    60 s and retried from JobSet's view, which still shows the JobSet running), so its resume of the Jobs stays in
    flight. More than the settle later the TrainJob is held, and Trainer's apply of the hold is answered 504 twice
    (`delay trainer:apply`; Trainer writes the `Suspended` condition after the first all the same, as upstream
    does), so the hold reaches the JobSet 120 s after it was recorded. A release comes while the JobSet still
    runs (evidence.py, 2: the JobSet's own suspension), and another just after it was suspended (evidence.py, 4:
    the settle counts from then, and the shortcut needs each Job resumed for this execution: they are still
    suspended from the earlier hold). JobSet's resume, built before it saw the suspension, then lands."""
    return [
        _release(rng),
        Step.of("advance", seconds=PAST_THE_SETTLE),
        _release(rng),  # running again (the retry of the release refused while part 3's hold settled)
        Step.of("advance", seconds=5),
        _hold(rng),
        Step.of("advance", seconds=PAST_THE_SETTLE),
        Step.of("stall", controllers="jobset", steps=RESUME_STALL_STEPS),
        _release(rng),
        Step.of("advance", seconds=PAST_THE_SETTLE),
        Step.of("delay", target="trainer:apply", steps=RESUME_STALL_STEPS),  # the hold's apply: 504 after 60 s
        Step.of("delay", target="trainer:apply", steps=RESUME_STALL_STEPS),  # and its retry
        _hold(rng),
        Step.of("advance", seconds=60),
        Step.of("advance", seconds=35),
        _release(rng),  # the JobSet still runs
        Step.of("advance", seconds=30),
        _release(rng),  # the JobSet was just suspended
        *(Step.of("advance", seconds=5) for _ in range(4)),
        Step.of("advance", seconds=30),
    ]


#: steps the paused apply of `_applied_without_the_label` stays unsent: across the hold, the settle and the
#: release after it
PAUSED_UNLABELLED_STEPS = 7


def _applied_without_the_label(rng: random.Random) -> list[Step]:
    """Part 6 of `story_in_flight_across_the_hold`: the same paused Trainer apply as part 3, where the JobSet's
    admission label cannot tell which execution Trainer applied, because a person dropped dispatch's runtime
    patch during a hold (`rewrite_patch drop-dispatch`; Trainer applies the suspended JobSet without the label)
    and again during the next hold. The release's apply is answered 504 (Trainer then writes `Suspended=False`,
    as upstream writes the status after a failed apply) and its retry is built and paused; the hold that follows
    reaches no controller, so only the TrainJob's `Suspended` condition, still False, shows that Trainer has not
    seen it (evidence.py, 1)."""
    return [
        _release(rng),
        Step.of("advance", seconds=PAST_THE_SETTLE),
        _release(rng),  # running again, and for long, so that the settle's shortcut applies to the hold
        Step.of("advance", seconds=PAST_THE_SETTLE),
        _hold(rng),
        Step.of("advance", seconds=PAST_THE_SETTLE),
        Step.of("rewrite_patch", obj=STORY_OBJECT, variant="drop-dispatch"),
        Step.of("advance", seconds=5),
        Step.of("delay", target="trainer:apply", steps=8),  # the release's apply: 504 after 60 s
        Step.of("delay", target="trainer:apply-paused", steps=PAUSED_UNLABELLED_STEPS),  # its retry, paused
        _release(rng),
        Step.of("advance", seconds=60),
        Step.of("advance", seconds=5),
        _hold(rng),
        Step.of("rewrite_patch", obj=STORY_OBJECT, variant="drop-dispatch"),
        Step.of("advance", seconds=PAST_THE_SETTLE),
        _release(rng),
        Step.of("advance", seconds=5),
        Step.of("advance", seconds=5),
        Step.of("advance", seconds=STOPPED),
    ]


def story_in_flight_across_the_hold(rng: random.Random) -> list[Step]:
    """Writes a controller started before it saw the hold, landing after it (issue 15 class 2; DESIGN §3.5). In a
    world whose JobSet restarts a failed Job (its failure policy, `restartStrategy: BlockingRecreate`: the Jobs
    are deleted, their pods awaited, then the Jobs created again), whose TrainJob has one replicated job, and
    whose processes stop within 8 s (story parameters):

    1. a long-running execution's process fails, and JobSet's creation of the restarted Job is slow in the API
       server (a slow admission webhook, API Priority and Fairness queueing); meanwhile a DAG holds the TrainJob
       and releases it at once (the Job does not exist yet);
    2. the same with the Job controller's creation of the restarted Job's pods slow instead (the Job is there and
       suspended by JobSet, but the Job controller, still in the sync that creates them, has not acted on it:
       `job_controller.go` `syncJob` runs one sync of a Job at a time);
    3. a release whose JobSet apply Trainer builds and then sends only minutes later (its process paused), with a
       hold at once and a release after the settle (`_applied_after_the_next_hold`);
    4. a release while JobSet's writes queue in the API server, so that its resume of the Jobs is still in flight
       when, more than the settle later, a hold reaches the JobSet late and releases follow
       (`_resumed_across_the_hold`);
    5. twice (once for each selection, so that one telling exercises both), a release whose pod creation is slow,
       and a hold at once: the pod lands after the hold recorded the execution's pods. A person notices the pod
       that appeared after the hold and removes labels from it to look at it (`kubectl label pod ...
       jobset.sigs.k8s.io/jobset-name-`, or dispatch's job-id, submission and admission labels); its machine
       hangs (`freeze`), and a release follows after the settle, before the operator fenced the node;
    6. part 3 again where the JobSet's admission label cannot tell the executions apart, because a person dropped
       dispatch's runtime patch during the holds (`_applied_without_the_label`)."""
    first, second = rng.sample(("jobset", "dispatch"), 2)
    return [
        *_restarted_across_the_hold(rng, "jobset:create-jobs"),
        *_restarted_across_the_hold(rng, "job:create-pods"),
        *_applied_after_the_next_hold(rng),
        *_resumed_across_the_hold(rng),
        *_created_across_the_hold(rng, first),
        *_created_across_the_hold(rng, second),
        *_applied_without_the_label(rng),
    ]


#: lab seconds the story lets pass after each failure of its process before the next, while the Job controller's
#: back-off doubles (10 s after the first failure since the last success, 20 s after the second, ...; `job_pods.py`,
#: `getRemainingTimeForFailuresCount`), with 5 s for the replacement to be scheduled and started
CRASH_LOOP = (15, 25, 45, 85)

#: `delay jobset:update-jobs` steps the story arms before its hold: JobSet's suspension of the Job and each retry
#: after its 504 (60 s each), so that the suspension lands about 180 s after the hold, after the back-off of the
#: fifth failure (160 s) has ended
SUSPENSION_DELAYS = 3


def story_replaced_after_its_back_off(rng: random.Random) -> list[Step]:
    """A Job that has not acted on the hold and has no pod to show it (evidence.py, 3: each Job read itself), in
    a world whose runtime has `restartPolicy: Never` (a failed process is replaced by a new pod after the Job
    controller's back-off, `backoffLimit` 6 by default) and one pod per TrainJob (story parameters). The process
    fails five times (a crash loop: a bad node, an NCCL error), so that after the fifth the Job waits 160 s
    before its replacement, with no pod running and JobSet's status showing none active. The TrainJob is held
    then, and JobSet's suspension of the Job is slow in the API server (a validating webhook on Jobs that times
    out; each attempt answered 504 after 60 s and retried) while Trainer's suspension of the JobSet and its
    `Suspended` condition are written at once. A release after the settle finds nothing running and every signal
    of the hold but the Job's own; the back-off then ends and the Job, not suspended, creates the replacement
    from the held execution's template, before JobSet's suspension lands and stops it. A release after the
    settle follows, and again after as long."""
    crash_loop: list[Step] = []
    for seconds in CRASH_LOOP:
        crash_loop += [Step.of("fail", obj=STORY_OBJECT, pick=0), Step.of("advance", seconds=seconds)]
    return [
        *_started(rng),
        *crash_loop,
        Step.of("fail", obj=STORY_OBJECT, pick=0),
        Step.of("advance", seconds=5),
        *(Step.of("delay", target="jobset:update-jobs", steps=12) for _ in range(SUSPENSION_DELAYS)),
        _hold(rng),
        Step.of("advance", seconds=PAST_THE_SETTLE),
        _release(rng),  # the Job is not suspended yet
        Step.of("advance", seconds=60),  # the replacement, at the end of the back-off
        Step.of("advance", seconds=30),  # JobSet's suspension
        *_released_after_the_settle(rng),
        Step.of("advance", seconds=STOPPED),
    ]


def story_partitioned_on_an_upstream_runtime(rng: random.Random) -> list[Step]:
    """Hazard H1 (issue 15 class 5), in a world whose last TrainJob runs on a runtime with upstream's
    `podReplacementPolicy` and no failure policy (story parameters): its releases, which the runtime policy must
    refuse; if one admits, a partition of a node of its execution for 400 s (taint eviction after the 300 s
    toleration, then the Job controller's replacement beside the evicted pod)."""
    return [
        *_started(rng, LAST_OBJECT),
        Step.of("partition", focus=_look(rng, LAST_OBJECT), seconds=400),
    ]


def story_restarted_beside_a_lost_node(rng: random.Random) -> list[Step]:
    """Hazard H2 (issue 15 class 6), in a world whose last TrainJob runs on a runtime with two replicated jobs, a
    failure policy and upstream's `restartStrategy` (`Recreate`; story parameters): its releases, which the
    runtime policy must refuse; if one admits, the launcher's node is cut off and the trainer's process fails,
    so that the JobSet restarts while the old launcher Job is held by its pod Terminating on the lost node."""
    last = {"obj": LAST_OBJECT}
    return [
        *_started(rng, LAST_OBJECT),
        Step.of("lose", focus=_look(rng, LAST_OBJECT, "launcher")),
        Step.of("fail", **last, pick=rng.randrange(16), rjob="node"),
        Step.of("advance", seconds=45),  # the Job fails, the JobSet restarts: attempt 1 beside attempt 0
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
    "in-flight-across-the-hold": story_in_flight_across_the_hold,
    "suspended-outside-then-held": story_suspended_outside_then_held,
    "relabelled-then-silent": story_relabelled_then_silent,
    "failure-recovery": story_failure_recovery,
    "slow-stop-relabelled-after-the-hold": story_slow_stop_relabelled_after_the_hold,
    "partitioned-on-an-upstream-runtime": story_partitioned_on_an_upstream_runtime,
    "restarted-beside-a-lost-node": story_restarted_beside_a_lost_node,
    "replaced-after-its-back-off": story_replaced_after_its_back_off,
}
#: world parameters a story needs (world_parameters draws grace_seconds 30 for every world)
STORY_PARAMETERS: Mapping[str, Mapping[str, Any]] = {
    # the returned kubelet stops the force-deleted pods' processes after its relist: they must take longer to stop
    # than the `JUST_RETURNED` seconds before the release (drawn 2 or 8 s, the relist alone may outlast them)
    "stuck-pod-force-deleted": {"termination_seconds": 25},
    "in-flight-across-the-hold": {"failure_policy": True, "replicated_jobs": 1, "termination_seconds": 8},
    "slow-stop-relabelled-after-the-hold": {"grace_seconds": LONG_GRACE},
    "replaced-after-its-back-off": {
        "restart_policy": "Never",
        "failure_policy": False,
        "replicated_jobs": 1,
        "num_nodes": (1,) * 8,
    },
    "partitioned-on-an-upstream-runtime": {"unsafe_object": True, "unsafe_risk": "pod-replacement"},
    "restarted-beside-a-lost-node": {
        "unsafe_object": True,
        "unsafe_risk": "jobset-restart",
        "failure_policy": True,
        "replicated_jobs": 2,
    },
}


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
    a `templated_name`; unchanged when the profile tells no stories. Its nodes have been Ready throughout since
    they booted, so a hold's record keeps their Ready transition and a release after the settle is refused only
    for what the story did (fencing.py: a node Ready throughout since the record confirms a vanished pod at
    once)."""
    if not profile.stories:
        return steps
    name, rng = story_of(seed)
    at = profile.objects
    return [
        *steps[:at],
        *STORIES[name](rng),
        templated_name(rng),
        *steps[at:],
    ]
