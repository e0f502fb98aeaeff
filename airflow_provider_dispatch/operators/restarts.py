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

The wait reason is shown at every stage as the sensors show theirs (`wait_reason.ShowsWaitReason`: log lines,
the rendered field `wait_reason`, the XCom `wait_reason`): its first line says what to do or what is awaited, and
the chain's line (`chain_line`: the submission, the restarts used and allowed) follows the remedy.

XCom (the return value) when a submission completes::

    {"outcome": "Complete", "trainjob": "ns/name-k", "submission": k, "restarts": k - 1,
     "execution": {"job_id": ..., "submission": "k", "admission": A}}

When `max_restarts` restarts all failed, the task fails (AirflowFailException, not retried) with the last
submission's outcome; the XCom `restarts` keeps the history. A retry of the task (a new try, after an error)
does not resume the chain: it starts again at submission 1, whose TrainJob exists already, and the open's
answer depends on that TrainJob's state (a held one that has finished is refused, `FinishedError`). Clear the
task only after deleting the chain's TrainJobs, or start a new job id.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any, NoReturn

from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException
from airflow.sdk import Context
from airflow.triggers.base import BaseTrigger

from airflow_provider_dispatch.dispatch import programs, restarts
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
DEFAULT_TRAINING_TIMEOUT = timedelta(days=7)


class TrainJobRestartOperator(ShowsWaitReason, TrainJobOpenOperator):
    """Open the manifest's TrainJob as submission 1; on `Failed`, hold it, wait for its pods, open the next.

    :param manifest: the TrainJob (templated; a dict or its YAML/JSON text). Submission k is named
        `<metadata.name>-<k>` and labelled submission k; the job id label defaults to `metadata.name`. The
        manifest must not set the submission label.
    :param max_restarts: restarts at most after the first submission (templated; 0 to 25, default 3).
    :param training_timeout: the longest wait for one submission's outcome (seconds or timedelta; 7 days).
    :param wait_timeout: the longest wait for a failed submission's pods, and for an open's (seconds or
        timedelta; None: `[sensors] default_timeout`).

    Other parameters: `AdmittingOperator` (`poke_interval`, `observe_timeout`, `recheck_interval`,
    `settle_seconds`, `accepted_risks`) and `TrainJobOperator` (the connection).
    """

    #: the wait reason first: the Rendered Templates tab lists the fields in this order
    template_fields: Sequence[str] = ("wait_reason", "manifest", "max_restarts")
    overwrite_rtif_after_execution: bool = True

    def __init__(
        self,
        *,
        manifest: Mapping[str, Any] | str,
        max_restarts: int | str = 3,
        training_timeout: float | timedelta = DEFAULT_TRAINING_TIMEOUT,
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
        super().__init__(manifest=manifest, deferrable=True, on_pods_remaining="wait", **kwargs)
        self.max_restarts = max_restarts
        self.training_timeout = seconds
        self.wait_reason = ""
        self._state: RestartState | None = None
        self._context: Context | None = None

    # --- the chain -----------------------------------------------------------------------------------------

    @property
    def state(self) -> RestartState:
        if self._state is None:
            raise AirflowException("the restart chain has no state (execute or a resume method sets it)")
        return self._state

    def template(self) -> Mapping[str, Any]:
        """The chain's manifest as rendered (TrainJobOpenOperator's parsing)."""
        return super().parsed_manifest()

    def parsed_manifest(self) -> Mapping[str, Any]:
        """The current submission's TrainJob: what `TrainJobOpenOperator.target` and `.admit` open."""
        with airflow_errors():
            return restarts.submission_manifest(self.template(), self.state.submission)

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
        self._context = context
        limit = self.validated_max_restarts()
        self._state = restarts.start(limit, time.time())
        self.log.info(
            "Restart chain of TrainJob %s: up to %s restart%s after submission 1",
            self.ref_of(1),
            limit,
            "" if limit == 1 else "s",
        )
        return self.run_chain(context)

    def run_chain(self, context: Context) -> dict[str, Any]:
        """Perform stages until the chain ends or a stage defers."""
        while True:
            state = self.state
            self.publish(context)
            if state.stage is Stage.OPEN:
                self.log.info("Submission %s: opening TrainJob %s", state.submission, self.ref_of(state.submission))
                self.opened(self.attempt(context))
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

    def move(self, event: restarts.Event) -> None:
        try:
            self._state = restarts.advance(self.state, event)
        except restarts.TransitionError as error:
            raise AirflowException(f"the restart chain cannot go on: {error}") from error

    def opened(self, execution: Mapping[str, Any]) -> None:
        self.move(restarts.Opened(int(execution["admission"]), time.time()))

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
        """The XCom `restarts`: the state, each submission with its TrainJob (the history for the DAG)."""
        value = self.state.as_json()
        for entry in value["history"]:
            entry["trainjob"] = str(self.ref_of(entry["submission"]))
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
        if self._context is not None:
            self.publish(self._context)
        carried = {**(kwargs or {}), STATE_KWARG: self.state.as_json()}
        super().defer(trigger=trigger, method_name=method_name, kwargs=carried, timeout=timeout)

    def resume(self, context: Context, restart_state: object) -> None:
        """Rebuild the chain after a deferral: from `next_kwargs`, else from this try's XCom."""
        self._context = context
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

    def resumed_event(
        self, context: Context, event: Mapping[str, Any] | None, restart_state: object
    ) -> tuple[Mapping[str, Any], object]:
        """Rebuild the chain, then the trigger's event and its status; an `error` event raises (the one mapping)."""
        self.resume(context, restart_state)
        event = event or {}
        if event.get("status") == "error":
            raise exception_for_event(event)
        return event, event.get("status")

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
        self, context: Context, event: Mapping[str, Any] | None = None, restart_state: object = None
    ) -> dict[str, Any]:
        """Resume the open from `PodsDrainedTrigger` (a namesake's pods), then go on with the chain."""
        self.resume(context, restart_state)
        self.opened(super().execute_complete(context, event))
        return self.run_chain(context)

    def settled_complete(
        self, context: Context, event: Mapping[str, Any] | None = None, restart_state: object = None
    ) -> dict[str, Any]:
        """Resume the open after its hold settled, then go on with the chain."""
        self.resume(context, restart_state)
        self.opened(super().settled_complete(context, event))
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
        self, context: Context, event: Mapping[str, Any] | None = None, restart_state: object = None
    ) -> dict[str, Any]:
        """Resume from `TrainJobOutcomeTrigger`: the outcome moves the chain on; a timeout fails the task."""
        event, status = self.resumed_event(context, event, restart_state)
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
        self, context: Context, event: Mapping[str, Any] | None = None, restart_state: object = None
    ) -> dict[str, Any]:
        """Resume from `PodsDrainedTrigger`: drained or ceased moves on, progress re-defers, timeout fails."""
        event, status = self.resumed_event(context, event, restart_state)
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


__all__ = ["STATE_KWARG", "XCOM_KEY", "TrainJobRestartOperator"]
