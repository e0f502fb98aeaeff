"""`TrainJobRestartOperator`: run a training as submission 1, and on failure restart it as submission 2, 3, ...

One task does what `example_dags/chained_restarts.py` writes by hand with task groups, branches and trigger
rules: it opens submission k (`TrainJobOpenOperator`'s open, with its drain check and its waits), waits for the
outcome of the execution it opened (`TrainJobOutcomeTrigger`), and when it is `Failed` holds that TrainJob
(`TrainJobHoldOperator`'s hold), waits until its pods are gone or proven ceased (`PodsDrainedTrigger`, as
`PodsDrainedSensor` waits), and opens submission k+1, up to `max_restarts` restarts. Submission k is the
TrainJob `<metadata.name>-<k>` of the manifest, labelled with the job id and submission k: a finished TrainJob is
never released again (Trainer does not run a finished JobSet again; dispatch refuses with `FinishedError`), so a
restart is a new submission (docs: airflow, "Submissions and admissions").

What to do next is decided by the pure state machine `dispatch.restarts`; this module only performs each stage:

* `open`: `TrainJobOpenOperator.attempt` on the submission's manifest (waiting for a namesake's pods or a
  settling hold deferred, as the open operator does);
* `outcome`: one read (`hooks.checks.outcome_check`), then a deferral to `TrainJobOutcomeTrigger` pinned to the
  opened admission number (unpinned in Kueue mode, where the open saw 0: the outcome of whatever execution
  Kueue runs of this submission's TrainJob, recorded as the execution that finished), for at most
  `training_timeout` per submission;
* `hold`: the adapter's hold of the failed submission;
* `drain`: one drain check (`hooks.checks.drain_check`), then a deferral to `PodsDrainedTrigger` (ceased
  accepted: the next submission is another TrainJob, so the pod objects of this one need not be gone, only
  their processes), re-deferred on `progress` with the new wait reason, for at most `wait_timeout` per drain.

Deferrable throughout: the task holds no worker slot while it waits, and always defers (`deferrable=False` and
`on_pods_remaining="retry"` are refused). The state of the chain crosses each deferral in the task's
`next_kwargs` (`restart_state`, the state machine's bounded JSON) and in its XCom `restarts`, which is also the
history for the DAG (submission, TrainJob, admission, outcome, its reason and message, when it was opened,
finished and drained). A triggerer restart re-creates the trigger from its kwargs; a worker resuming the task
rebuilds the chain from `next_kwargs`, or from the XCom where a runner does not pass the deferral's kwargs back
(Airflow 3.3's `dag.test()` passes only the event). The XCom survives deferrals (Airflow clears a task's XComs
only when a try starts, not when it resumes).

The cluster is the chain's memory. Every try of the task starts by reading the chain's TrainJobs
(`dispatch.resume`) and goes on from what they show (`dispatch.chain.from_cluster`): a retry, a Clear, a try
Airflow failed while it ran (the stale-executor race, apache/airflow#72716) or a worker killed mid-chain resumes
the chain where it stands, never from submission 1 again, and the restarts used are the submissions that exist.
A try that Airflow starts at an earlier try's deferral (a task cleared while it ran resumes at its last deferral,
with that deferral's kwargs and event) sees it by the try number the deferral carried (`restart_try`), and reads
the cluster too. Before it opens submission k the chain reads again: when another try of the task (a zombie
beside its retry) opened k already, it takes that TrainJob as it is. The create of `<name>-<k>` is the fence: of
two tries only one creates it, and the other adopts it (the open's AlreadyExists of the same job id and
submission), so two tries open at most one next submission. `per_run=True` gives each DAG run a chain of its own
(`dispatch.restarts.run_key`): every try of a run finds its run's chain, and no run finds another's.

The race is also met less: pods that only start (Pending, then Running) are no progress at all (the explanation's
fingerprint leaves them out, `dispatch.unfinished`); other progress (a wait reason that changed without changing
any decision, such as a node of the pods going not Ready) is held back by the triggers for `quiet_period` seconds
after every deferral, and the chain never defers on a timer shorter than that; an outcome, drained or ceased is
reported at once.

The wait reason is shown at every stage as the sensors show theirs (`wait_reason.ShowsWaitReason`: log lines,
the rendered field `wait_reason`, the XCom `wait_reason`): its first line says what to do or what is awaited, and
the chain's line (`chain_line`: the submission, the restarts used and allowed) follows the remedy. The rendered
field `trainjobs` lists the chain's TrainJobs that exist, as they are opened.

XCom (the return value) when a submission completes::

    {"outcome": "Complete", "trainjob": "ns/name-k", "submission": k, "restarts": k - 1,
     "execution": {"job_id": ..., "submission": "k", "admission": A}}

When `max_restarts` restarts all failed, the task fails (AirflowFailException, not retried) with the last
submission's outcome; the XCom `restarts` keeps the history. A new try of an exhausted chain fails the same way.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any, NoReturn

from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException
from airflow.sdk import Context
from airflow.triggers.base import BaseTrigger

from airflow_provider_dispatch.dispatch import chain as chains
from airflow_provider_dispatch.dispatch import programs, restarts, resume
from airflow_provider_dispatch.dispatch.chain import Chain
from airflow_provider_dispatch.dispatch.errors import FinishedError
from airflow_provider_dispatch.dispatch.reasons import WaitReason
from airflow_provider_dispatch.dispatch.restarts import RestartState, Stage
from airflow_provider_dispatch.dispatch.validation import Ref
from airflow_provider_dispatch.dispatch.vocabulary import LABEL_JOB_ID
from airflow_provider_dispatch.hooks.checks import OutcomeCheck, drain_check, outcome_check
from airflow_provider_dispatch.hooks.errors import airflow_errors, exception_for_event
from airflow_provider_dispatch.operators.trainjob import TrainJobOpenOperator
from airflow_provider_dispatch.sensors.pods_drained import drain_wait_reason
from airflow_provider_dispatch.sensors.trainjob_outcome import outcome_from_event, outcome_wait_reason
from airflow_provider_dispatch.triggers.trainjob_outcome import TrainJobOutcomeTrigger, waiting_fingerprint
from airflow_provider_dispatch.wait_reason import ShowsWaitReason

#: the XCom key of the chain's state and history
XCOM_KEY = "restarts"
#: the `next_kwargs` key of the chain's state
STATE_KWARG = "restart_state"
#: the `next_kwargs` key of the try that deferred (a later try resumed at that deferral goes on from the cluster)
TRY_KWARG = "restart_try"
DEFAULT_TRAINING_TIMEOUT = timedelta(days=7)
#: seconds after a deferral during which the triggers hold back progress (Airflow's stale-executor race,
#: apache/airflow#72716: the scheduler drains the deferring run's report within a few seconds, slower under load)
DEFAULT_QUIET_PERIOD = 30.0


class TrainJobRestartOperator(ShowsWaitReason, TrainJobOpenOperator):
    """Open the manifest's TrainJob as submission 1; on `Failed`, hold it, wait for its pods, open the next.

    :param manifest: the TrainJob (templated; a dict or its YAML/JSON text). Submission k is named
        `<metadata.name>-<k>` and labelled submission k; the job id label defaults to `metadata.name`. The
        manifest must not set the submission label.
    :param max_restarts: restarts at most after the first submission (templated; 0 to 25, default 3).
    :param training_timeout: the longest wait for one submission's outcome (seconds or timedelta; 7 days).
    :param wait_timeout: the longest wait for a failed submission's pods, and for an open's (seconds or
        timedelta; None: `[sensors] default_timeout`).
    :param per_run: each DAG run a chain of its own: the TrainJobs are `<metadata.name>-<key>-<k>` and the job id
        `<job id>-<key>`, where the key is the run's date and a digest of the DAG, task and run
        (`dispatch.restarts.run_key`: the same for a retry or a Clear of the run, another for every other run).
    :param quiet_period: seconds (or timedelta) after each deferral during which the triggers report no progress
        and no timer of the chain ends (default 30; 0: none).

    Other parameters: `AdmittingOperator` (`poke_interval`, `observe_timeout`, `recheck_interval`,
    `settle_seconds`, `accepted_risks`) and `TrainJobOperator` (the connection).
    """

    #: the wait reason first: the Rendered Templates tab lists the fields in this order
    template_fields: Sequence[str] = ("wait_reason", "trainjobs", "manifest", "max_restarts")
    overwrite_rtif_after_execution: bool = True

    def __init__(
        self,
        *,
        manifest: Mapping[str, Any] | str,
        max_restarts: int | str = 3,
        training_timeout: float | timedelta = DEFAULT_TRAINING_TIMEOUT,
        per_run: bool = False,
        quiet_period: float | timedelta = DEFAULT_QUIET_PERIOD,
        **kwargs: Any,
    ) -> None:
        for option, only in (("deferrable", True), ("on_pods_remaining", "wait")):
            if kwargs.pop(option, only) != only:
                raise ValueError(f"TrainJobRestartOperator always waits deferred: {option} can only be {only!r}")
        if not (isinstance(max_restarts, str) and "{{" in max_restarts):
            restarts.validate_max_restarts(max_restarts)  # a literal is checked when the DAG is parsed
        seconds = (
            training_timeout.total_seconds() if isinstance(training_timeout, timedelta) else float(training_timeout)
        )
        if isinstance(training_timeout, bool) or not seconds > 0:
            raise ValueError(f"training_timeout must be a positive duration, not {training_timeout!r}")
        quiet = quiet_period.total_seconds() if isinstance(quiet_period, timedelta) else quiet_period
        if isinstance(quiet, bool) or not isinstance(quiet, int | float) or not 0 <= quiet <= 3600:
            raise ValueError(f"quiet_period must be from 0 to 3600 seconds, not {quiet_period!r}")
        if not isinstance(per_run, bool):
            raise ValueError(f"per_run must be True or False, not {per_run!r}")
        super().__init__(manifest=manifest, deferrable=True, on_pods_remaining="wait", **kwargs)
        self.max_restarts = max_restarts
        self.training_timeout = seconds
        self.per_run = per_run
        self.quiet_period = float(quiet)
        self.wait_reason = ""
        self.trainjobs: list[str] = []
        self._state: RestartState | None = None
        self._context: Context | None = None

    # --- the chain -----------------------------------------------------------------------------------------

    @property
    def state(self) -> RestartState:
        if self._state is None:
            raise AirflowException("the restart chain has no state (execute or a resume method sets it)")
        return self._state

    def template(self) -> Mapping[str, Any]:
        """The chain's manifest as rendered (TrainJobOpenOperator's parsing), for this DAG run with `per_run`."""
        manifest = super().parsed_manifest()
        if not self.per_run:
            return manifest
        with airflow_errors():
            return restarts.per_run(manifest, self.run_key())

    def run_key(self) -> str:
        """This DAG run's key (`dispatch.restarts.run_key`), from the task's context."""
        if self._context is None:
            raise AirflowException("per_run needs the task's context (execute or a resume method sets it)")
        ti, dag_run = self._context["ti"], self._context["dag_run"]
        date = getattr(dag_run, "logical_date", None) or dag_run.run_after
        index = -1 if ti.map_index is None else ti.map_index
        return restarts.run_key(dag_id=ti.dag_id, task_id=ti.task_id, run_id=ti.run_id, date=date, map_index=index)

    def chain(self) -> Chain:
        with airflow_errors():
            return chains.chain_of(self.template())

    def parsed_manifest(self) -> Mapping[str, Any]:
        """The current submission's TrainJob: what `TrainJobOpenOperator.target` and `.admit` open (after the
        first, with the submission it follows and how that one's pods went)."""
        state = self.state
        previous = state.history[-2] if len(state.history) > 1 else None
        follows = previous if previous is not None and previous.drained is not None else None
        with airflow_errors():
            return restarts.submission_manifest(self.template(), state.submission, follows=follows)

    def ref_of(self, submission: int) -> Ref:
        with airflow_errors():
            return programs.prepare_manifest(restarts.submission_manifest(self.template(), submission))[0]

    def validated_max_restarts(self) -> int:
        """The rendered parameters, checked before anything is written: a refusal otherwise."""
        try:
            limit = restarts.validate_max_restarts(self.max_restarts)
        except ValueError as error:
            raise AirflowFailException(str(error)) from None
        for submission in (1, limit + 1):  # the longest name is the last submission's
            self.ref_of(submission)
        return limit

    def check_inputs(self) -> None:
        """The rendered manifest and `max_restarts`, before the connection is used: the open's `target` needs
        the chain's state, which only `execute` starts."""
        self.validated_max_restarts()

    def execute(self, context: Context) -> dict[str, Any]:
        """A new try: the chain as the cluster shows it (nothing yet: submission 1), then on from there."""
        self._context = context
        limit = self.validated_max_restarts()
        chain = self.chain()
        self._state = self.from_cluster(chain, limit)
        self.log.info(
            "Restart chain %s, %s, ... (job id %s), up to %s restart%s after submission 1: %s",
            chain.ref(1),
            restarts.trainjob_name(chain.base, 2),
            chain.job_id,
            limit,
            "" if limit == 1 else "s",
            chains.describe(self.state, chain),
        )
        return self.run_chain(context)

    def from_cluster(self, chain: Chain, limit: int) -> RestartState:
        """The chain's state read off its TrainJobs (`dispatch.resume`), its stage starting now."""
        adapter = self.hook.get_adapter(read_only=True)
        with airflow_errors():
            return adapter.run(resume.resume(chain, limit, time.time()))

    def run_chain(self, context: Context) -> dict[str, Any]:
        """Perform stages until the chain ends or a stage defers."""
        while True:
            state = self.state
            self.publish(context)
            if state.stage is Stage.OPEN:
                self.open_submission(context)
            elif state.stage is Stage.OUTCOME:
                self.check_outcome(context)
            elif state.stage is Stage.HOLD:
                ref = self.ref_of(state.submission)
                with airflow_errors():
                    execution = self.adapter().hold(ref)
                self.log.info(
                    "Submission %s failed: held TrainJob %s (execution %s)", state.submission, ref, execution.admission
                )
                self.move(restarts.Held(time.time()))
            elif state.stage is Stage.DRAIN:
                self.check_drain(context)
            elif state.stage is Stage.SUCCEEDED:
                return self.result()
            else:
                raise AirflowFailException(restarts.give_up_message(state, str(self.ref_of(state.submission))))

    def open_submission(self, context: Context) -> None:
        """Open submission k, unless the cluster shows that another try of this task got further meanwhile."""
        submission = self.state.submission
        if self.adopted(submission):
            return
        self.log.info("Submission %s: opening TrainJob %s", submission, self.ref_of(submission))
        self.opening(lambda: self.attempt(context))

    def adopted(self, submission: int) -> bool:
        """Read the chain before opening `submission`: when it exists already (opened by another try of this task:
        a zombie beside its retry), go on from what the cluster shows instead (True). A TrainJob of it that is
        held and unfinished is still opened (False): the open takes it as it is and releases it."""
        chain = self.chain()
        adapter = self.hook.get_adapter(read_only=True)
        with airflow_errors():
            found = adapter.run(resume.read_chain(chain))
            if max((chains.chain_submission(chain, t) for t in found), default=0) < submission:
                return False
            state = chains.from_cluster(self.state.max_restarts, chain, found, time.time())
        if state.stage is Stage.OPEN and state.submission == submission:
            self.log.info(
                "Submission %s: TrainJob %s exists already, held and not finished (another try of this task "
                "created it): opening it as it is",
                submission,
                self.ref_of(submission),
            )
            return False
        self.log.info(
            "Submission %s: TrainJob %s exists already (another try of this task opened it); going on from the "
            "cluster: %s",
            submission,
            self.ref_of(submission),
            chains.describe(state, chain),
        )
        self._state = state
        return True

    def opening(self, open_call: Callable[[], Mapping[str, Any]]) -> None:
        """Run the open (first call or resumed after its deferral) and record what it opened. A submission that
        finished meanwhile (another try of this task ran it and held it) is no refusal: the chain goes on from
        what the cluster shows."""
        try:
            execution = open_call()
        except AirflowFailException as error:
            if not isinstance(error.__cause__, FinishedError):
                raise
            chain = self.chain()
            self._state = self.from_cluster(chain, self.state.max_restarts)
            self.log.info(
                "Submission %s finished before this try could open it (another try of this task ran it); going on "
                "from the cluster: %s",
                self.state.submission,
                chains.describe(self.state, chain),
            )
            return
        self.opened(execution)

    def move(self, event: restarts.Event) -> None:
        try:
            self._state = restarts.advance(self.state, event)
        except restarts.TransitionError as error:
            raise AirflowException(f"the restart chain cannot go on: {error}") from error

    def opened(self, execution: Mapping[str, Any]) -> None:
        """The open's execution; under Kueue 0 whatever it returned (Kueue admits: the outcome of whatever execution
        it runs counts, `awaited`), also when the open found the submission admitted already."""
        admission = 0 if self.opens_in_kueue() else int(execution["admission"])
        self.move(restarts.Opened(admission, time.time()))

    def result(self) -> dict[str, Any]:
        state = self.state
        labels = restarts.submission_manifest(self.template(), state.submission)["metadata"]["labels"]
        return {
            "outcome": restarts.COMPLETE,
            "trainjob": str(self.ref_of(state.submission)),
            "submission": state.submission,
            "restarts": state.restarts,
            "execution": {
                "job_id": labels[LABEL_JOB_ID],
                "submission": str(state.submission),
                "admission": state.current.admission,
            },
        }

    def publish(self, context: Context) -> None:
        """The XCom `restarts`: the state, each submission with its TrainJob (the history for the DAG); and the
        rendered field `trainjobs`: the TrainJobs of the chain that exist (opened, or read off the cluster)."""
        value = self.state.as_json()
        for entry in value["history"]:
            entry["trainjob"] = str(self.ref_of(entry["submission"]))
        self.trainjobs = [entry["trainjob"] for entry in value["history"] if entry["opened_at"] is not None]
        context["ti"].xcom_push(key=XCOM_KEY, value=value)

    # --- crossing deferrals --------------------------------------------------------------------------------

    def defer(
        self,
        *,
        trigger: BaseTrigger,
        method_name: str,
        kwargs: dict[str, Any] | None = None,
        timeout: timedelta | int | float | None = None,
    ) -> NoReturn:
        """Every deferral (the open's included) carries the chain's state to the resume method."""
        carried = {**(kwargs or {}), STATE_KWARG: self.state.as_json()}
        if self._context is not None:
            self.publish(self._context)
            carried[TRY_KWARG] = self._context["ti"].try_number
        super().defer(trigger=trigger, method_name=method_name, kwargs=carried, timeout=timeout)

    def resume(self, context: Context, restart_state: object, restart_try: object = None) -> bool:
        """Rebuild the chain after a deferral: from `next_kwargs`, else from this try's XCom (True).

        False when this is a new try started at an earlier try's deferral: Airflow 3.3 clears a task that runs by
        stopping it and starting the next try at the method its last deferral named, with that deferral's kwargs
        and trigger event (`clear_task_instances` keeps `next_method` for a running task instance). What that
        deferral carried may be long out of date, so the chain is read off the cluster instead, and the caller
        goes on from there without the event."""
        self._context = context
        current = context["ti"].try_number if restart_try is not None else None
        if restart_try is not None and restart_try != current:
            chain = self.chain()
            self._state = self.from_cluster(chain, self.validated_max_restarts())
            self.log.info(
                "Try %s starts where try %s deferred (a task cleared while it ran resumes at its last deferral): "
                "going on from the cluster, not from that deferral's event: %s",
                current,
                restart_try,
                chains.describe(self.state, chain),
            )
            return False
        source = "next_kwargs"
        if restart_state is None:
            restart_state, source = context["ti"].xcom_pull(task_ids=self.task_id, key=XCOM_KEY), "XCom"
        if restart_state is None:
            raise AirflowException("resumed without the restart chain's state (neither next_kwargs nor XCom)")
        self.log.info("Resuming the restart chain from its %s", source)
        try:
            self._state = restarts.from_json(restart_state)
        except restarts.TransitionError as error:
            raise AirflowException(f"cannot resume the restart chain: {error}") from error
        return True

    def resumed_event(
        self, context: Context, event: Mapping[str, Any] | None, restart_state: object, restart_try: object
    ) -> tuple[Mapping[str, Any], object] | None:
        """Rebuild the chain, then the trigger's event and its status; an `error` event raises (the one mapping).
        None: a new try that goes on from the cluster (`resume`), the event not its own."""
        if not self.resume(context, restart_state, restart_try):
            return None
        event = event or {}
        if event.get("status") == "error":
            raise exception_for_event(event)
        return event, event.get("status")

    def quiet_until(self) -> float | None:
        """The end of the quiet period after a deferral made now (None without one)."""
        return time.time() + self.quiet_period if self.quiet_period > 0 else None

    def settle_wait(self, seconds_left: float) -> float:
        """A settling hold is looked at again no sooner than the quiet period (a timer is no decision)."""
        return max(super().settle_wait(seconds_left), self.quiet_period)

    def deadline(self, context: Context) -> float:
        """The open's wait (a namesake's pods) and the drain are bounded from the start of their stage."""
        return self.state.stage_started + self.wait_timeout

    def _show_reason(self, reason: WaitReason) -> None:
        """The open's waits (`AdmittingOperator`) shown as the sensors show theirs, with the chain's line."""
        if self._context is None:
            super()._show_reason(reason)
            return
        submission = self.state.submission
        chain = f"{self.chain_line()}: opening TrainJob {self.ref_of(submission)} waits."
        self.show_wait_reason(self._context, reason.around(chain))

    def chain_line(self) -> str:
        """Who waits, in the chain's words: the submission and the restarts allowed. Every wait reason of the
        chain carries it below its first line and remedy (`reasons.WaitReason.around`), never before them."""
        state = self.state
        return f"Restart chain, submission {state.submission} of at most {state.max_restarts + 1}"

    def execute_complete(
        self,
        context: Context,
        event: Mapping[str, Any] | None = None,
        restart_state: object = None,
        restart_try: object = None,
    ) -> dict[str, Any]:
        """Resume the open from `PodsDrainedTrigger` (a namesake's pods), then go on with the chain."""
        if self.resume(context, restart_state, restart_try):
            self.opening(lambda: super(TrainJobRestartOperator, self).execute_complete(context, event))
        return self.run_chain(context)

    def settled_complete(
        self,
        context: Context,
        event: Mapping[str, Any] | None = None,
        restart_state: object = None,
        restart_try: object = None,
    ) -> dict[str, Any]:
        """Resume the open after its hold settled, then go on with the chain."""
        if self.resume(context, restart_state, restart_try):
            self.opening(lambda: super(TrainJobRestartOperator, self).settled_complete(context, event))
        return self.run_chain(context)

    # --- the outcome ---------------------------------------------------------------------------------------

    def awaited(self) -> int | None:
        """The admission number whose outcome counts (None in Kueue mode, where the open admits nothing: 0)."""
        admission = self.state.current.admission
        return admission if admission else None

    def check_outcome(self, context: Context) -> None:
        ref = self.ref_of(self.state.submission)
        adapter = self.hook.get_adapter(read_only=True)
        with airflow_errors():
            check = adapter.run(outcome_check(ref, adapter.operations))
        if self.outcome_shown(context, check):
            return
        self.defer_outcome(check)

    def defer_outcome(self, check: OutcomeCheck) -> NoReturn:
        """Defer to the outcome trigger, which answers on an outcome, at the deadline, or when what keeps the
        TrainJob from finishing changes from `check`'s (`progress`: the worker shows it and defers again)."""
        ref = self.ref_of(self.state.submission)
        deadline = self.state.stage_started + self.training_timeout
        trigger = TrainJobOutcomeTrigger(
            ref.namespace,
            ref.name,
            admission=self.awaited(),
            deadline=deadline,
            recheck_interval=self.recheck_interval,
            known_fingerprint=waiting_fingerprint(check),
            quiet_until=self.quiet_until(),
            **self.hook.trigger_connection_kwargs(),
        )
        self.defer_until(trigger, "outcome_complete", deadline)

    def outcome_shown(self, context: Context, check: Any) -> bool:
        """Show the outcome wait's reason; on an outcome, move the chain on (True)."""
        finished, reason = outcome_wait_reason(check, self.awaited())
        self.show_wait_reason(context, reason.around(f"{self.chain_line()}."))
        if finished:
            admission = check.execution.admission
            self.move(restarts.Finished(str(check.outcome), check.reason, check.message, time.time(), admission))
        return finished

    def outcome_complete(
        self,
        context: Context,
        event: Mapping[str, Any] | None = None,
        restart_state: object = None,
        restart_try: object = None,
    ) -> dict[str, Any]:
        """Resume from `TrainJobOutcomeTrigger`: the outcome moves the chain on; a timeout fails the task."""
        resumed = self.resumed_event(context, event, restart_state, restart_try)
        if resumed is None:
            return self.run_chain(context)
        event, status = resumed
        if status not in ("finished", "timeout", "progress"):
            raise AirflowException(f"TrainJobOutcomeTrigger sent an event this operator does not know: {status!r}")
        check = outcome_from_event(event)
        finished = self.outcome_shown(context, check)
        if not finished and status == "progress":
            self.defer_outcome(check)
        if not finished:
            raise AirflowException(
                f"Gave up waiting for the outcome of submission {self.state.submission} after "
                f"training_timeout={self.training_timeout:.0f}s: {self.wait_reason}. Nothing was restarted."
            )
        return self.run_chain(context)

    # --- the drain -----------------------------------------------------------------------------------------

    def check_drain(self, context: Context) -> None:
        ref = self.ref_of(self.state.submission)
        adapter = self.hook.get_adapter(read_only=True)
        with airflow_errors():
            check = adapter.run(drain_check(ref, adapter.operations)).as_dict()
        if not self.drain_shown(context, check):
            self.defer_drain(check["report"].get("fingerprint"))

    def drain_shown(self, context: Context, check: Mapping[str, Any]) -> bool:
        """Show the drain wait's reason; when drained or ceased, move the chain on (True)."""
        submission = self.state.submission
        ref = str(self.ref_of(submission))
        outcome, reason = drain_wait_reason(check, accept_ceased=True, ref=ref)
        chain = f"{self.chain_line()} failed; submission {submission + 1} opens once its pods are gone or stopped."
        self.show_wait_reason(context, reason.around(chain))
        if outcome is not None:
            self.move(restarts.Drained(outcome, time.time()))
        return outcome is not None

    def defer_drain(self, known: str | None) -> NoReturn:
        ref = self.ref_of(self.state.submission)
        deadline = self.state.stage_started + self.wait_timeout
        trigger = self.pods_drained_trigger(ref, known, deadline, accept_ceased=True)
        self.defer_until(trigger, "drain_complete", deadline)

    def drain_complete(
        self,
        context: Context,
        event: Mapping[str, Any] | None = None,
        restart_state: object = None,
        restart_try: object = None,
    ) -> dict[str, Any]:
        """Resume from `PodsDrainedTrigger`: drained or ceased moves on, progress re-defers, timeout fails."""
        resumed = self.resumed_event(context, event, restart_state, restart_try)
        if resumed is None:
            return self.run_chain(context)
        event, status = resumed
        if not isinstance(event.get("report"), Mapping):
            raise AirflowException(f"PodsDrainedTrigger sent an event this operator does not know: {status!r}")
        if not self.drain_shown(context, event):
            if status == "timeout":
                raise AirflowException(
                    f"Gave up after wait_timeout={self.wait_timeout:.0f}s; submission "
                    f"{self.state.submission + 1} was NOT opened: cessation of the failed submission's pods was "
                    f"not proven. {self.wait_reason}"
                )
            self.defer_drain(event["report"].get("fingerprint"))
        return self.run_chain(context)


__all__ = ["STATE_KWARG", "TRY_KWARG", "XCOM_KEY", "TrainJobRestartOperator"]
