"""The TrainJob operators: hold, release, open. Each returns the execution identity as its XCom.

* `TrainJobHoldOperator`: keep the TrainJob from running (plain mode: `spec.suspend: true`; Kueue mode: the
  Workload deactivated). Idempotent.
* `TrainJobReleaseOperator`: lift the hold and admit a new execution, after the drain check (DESIGN §3). A
  running TrainJob is returned as it is (a retry after a lost response admits nothing).
* `TrainJobOpenOperator`: create a new TrainJob held from a manifest, then release it (the same check: a
  TrainJob of that name may have left pods). A retried open continues with the object it created.

XCom (the return value) of all three: `{"job_id": ..., "submission": ..., "admission": A}` (`Execution.as_dict()`).

When the drain check finds remaining pods (`PodsRemainError`), `on_pods_remaining` chooses:

* `"wait"` (default): wait for the pods to go, then release. Deferrable (default `[operators]
  default_deferrable`): defer to `PodsDrainedTrigger` (drained, not merely ceased: the release needs the pod
  objects gone) and release in `execute_complete`, re-checking there, since another caller may have admitted
  meanwhile (release is idempotent; the trigger also stops early when the TrainJob is no longer held). When the
  trigger reports a change (`progress`: the remaining pods or a node's state moved), the worker runs the release
  once more: a writer's check, which adds to the hold's record what it sees (a pod on its node, a Node found
  deleted, dispatch/fencing.py) before it defers again. Not
  deferrable: check again every `poke_interval` seconds in the worker, which holds a worker slot for the whole
  wait (use it for short waits only). Both give up after `wait_timeout` with a retryable AirflowException.
* `"retry"`: raise the retryable AirflowException with the PodsRemainError message (the pods and their nodes,
  what would unblock them), so that the task's `retries` and `retry_delay` do the waiting.

`SuspensionNotObservedError` (Trainer or JobSet has not observed the hold yet, normally a matter of a second,
and always the case right after an open creates the TrainJob) is waited for in the worker for up to
`observe_timeout` seconds with `"wait"`, and raised as retryable with `"retry"`. `HoldSettlingError` (the hold is
observed, and settles for a known time, at most `settle_seconds`, so that a write a controller started before it
cannot land after the check: dispatch/evidence.py) is waited for with `"wait"`: deferred to a `TimeDeltaTrigger`
for that time (at most `poke_interval`, then the check runs again) when deferrable, else slept in the worker;
raised as retryable with `"retry"`.

`settle_seconds` (90 by default) and `accepted_risks` (runtime risks a platform team accepts by name:
`pod-replacement`, `jobset-restart`; dispatch/policy.py) are the adapter's options; every admission of a runtime
with an accepted risk is logged with it.

A conflict (409: Trainer wrote the TrainJob between dispatch's read and its write) re-runs the whole operation
from its first read inside the try, up to `conflict_attempts` times, each retry logged (dispatch/conflicts.py); a
conflict on every attempt raises the retryable `PersistentConflictError`. Release and open retry here rather than
in the adapter, so that each retry consults the record of the admission first (below): a PUT re-sent after a lost
answer is refused with 409, and the retry then returns the execution it admitted instead of checking again.

Errors map in one place (`hooks.errors`): unreachable (including pods remaining) -> AirflowException, retried;
refused (not found, not managed, invalid name, forbidden, finished, spec rejected) -> AirflowFailException.

Retries after a lost response: the execution about to be admitted is recorded first in Airflow 3.3's task
state store (`operators.execution_record`), so a later try that finds it admitted returns it, even if the
object was held again meanwhile, instead of admitting a second execution.

Kueue mode (the TrainJob carries `kueue.x-k8s.io/queue-name`): the admission check controller runs the drain
check and Kueue admits; release reactivates the Workload and returns the current execution. Waiting for the
Workload's `Admitted` condition is the hook point `TrainJobReleaseOperator.admit_kueue` (not yet implemented).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any, Final, Literal, NoReturn

import yaml
from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException, conf
from airflow.providers.standard.triggers.temporal import TimeDeltaTrigger
from airflow.sdk import BaseOperator, Context
from airflow.triggers.base import BaseTrigger

from airflow_provider_dispatch.backoff import Backoff, BackoffSchedule
from airflow_provider_dispatch.dispatch import programs, reasons
from airflow_provider_dispatch.dispatch.assessment import Execution, ManagedObject, Mode, Released, is_held, managed
from airflow_provider_dispatch.dispatch.conflicts import (
    DEFAULT_CONFLICT_ATTEMPTS,
    ConflictRetry,
    persistent,
    state_after,
    validate_conflict_attempts,
)
from airflow_provider_dispatch.dispatch.errors import (
    ConflictError,
    DispatchError,
    HoldSettlingError,
    NotFoundError,
    NotManagedError,
    PodsRemainError,
    SuspensionNotObservedError,
)
from airflow_provider_dispatch.dispatch.evidence import DEFAULT_SETTLE_SECONDS
from airflow_provider_dispatch.dispatch.explain import not_admitted_reason
from airflow_provider_dispatch.dispatch.nodes import DEFAULT_CLOCK_SKEW_SECONDS
from airflow_provider_dispatch.dispatch.payloads import remaining_fingerprint
from airflow_provider_dispatch.dispatch.policy import validate_accepted_risks
from airflow_provider_dispatch.dispatch.reasons import WaitReason
from airflow_provider_dispatch.dispatch.sync_adapter import DispatchAdapter
from airflow_provider_dispatch.dispatch.validation import Ref, parse_ref, rendered_nothing
from airflow_provider_dispatch.dispatch.vocabulary import (
    LABEL_JOB_ID,
    LABEL_KUEUE_QUEUE_NAME,
    LABEL_SUBMISSION,
    labels_of,
)
from airflow_provider_dispatch.hooks.dispatch import DEFAULT_CONN_ID, DispatchHook
from airflow_provider_dispatch.hooks.errors import airflow_errors, airflow_exception, exception_for_event
from airflow_provider_dispatch.lineage.trainjob import trainjob_lineage
from airflow_provider_dispatch.operators.execution_record import ExecutionRecords, ExpectedExecution
from airflow_provider_dispatch.triggers.base import DEFAULT_RECHECK_INTERVAL
from airflow_provider_dispatch.triggers.pods_drained import PodsDrainedTrigger

OnPodsRemaining = Literal["wait", "retry"]
#: how long after `wait_timeout` the deferral itself times out (the trigger answers at the deadline)
DEFERRAL_MARGIN: Final = timedelta(minutes=5)
#: the pauses between tries while the hold is not observed yet (within `observe_timeout`)
OBSERVE_BACKOFF: Final = BackoffSchedule(initial=0.5, maximum=5.0)
#: the waits for a hold to be observed that are logged only as what is awaited (the first few, a few seconds of
#: backoff): after them, each wait also says what exactly is not observed yet, since that is no longer the usual
QUIET_OBSERVE_CHECKS: Final = 3


def released_line(ref: str, execution: Execution) -> str:
    """What a release or an open did, from its program's result (`Execution.released`), for the task's log."""
    said = {
        Released.ADMITTED: f"TrainJob {ref}: admitted execution {execution.admission}",
        Released.ALREADY_RUNNING: f"TrainJob {ref} already runs execution {execution.admission}; nothing written",
        Released.RUNNING_AFTER_CONFLICT: (
            f"TrainJob {ref} runs execution {execution.admission} after a conflict: an admission happened (this "
            "try's write, re-sent after its answer was lost, or another caller's); nothing more written"
        ),
        Released.WORKLOAD_ACTIVE: (
            f"TrainJob {ref}: its Workload is active; Kueue admits the next execution once dispatch's admission "
            "check is Ready "
            + (f"(current execution: {execution.admission})" if execution.admission else "(none admitted yet)")
        ),
    }
    # not said by a program: the execution an earlier try recorded and reached (`_admit_once`), read off the object
    return said.get(execution.released, f"TrainJob {ref}: returning execution {execution.admission}; nothing written")


class TrainJobOperator(BaseOperator):
    """The connection handling of the TrainJob operators (see `DispatchHook` for the parameters).

    :param kubernetes_conn_id: a cncf-kubernetes `kubernetes` connection (default `kubernetes_default`).
    :param cluster_context: overrides the connection's `cluster_context` extra.
    :param config_file: a kubeconfig path; overrides the connection's `kube_config_path` extra.
    :param in_cluster: overrides the connection's `in_cluster` extra.
    :param conflict_attempts: how many times the operation runs from its first read when it meets a conflict
        (Trainer writing the TrainJob between dispatch's read and write), 1 to 20 (dispatch/conflicts.py).
    """

    ui_color = "#dfe9f7"

    def __init__(
        self,
        *,
        kubernetes_conn_id: str | None = DEFAULT_CONN_ID,
        cluster_context: str | None = None,
        config_file: str | None = None,
        in_cluster: bool | None = None,
        conflict_attempts: int = DEFAULT_CONFLICT_ATTEMPTS,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.kubernetes_conn_id = kubernetes_conn_id
        self.cluster_context = cluster_context
        self.config_file = config_file
        self.in_cluster = in_cluster
        self.conflict_attempts = validate_conflict_attempts(conflict_attempts)

    @cached_property
    def hook(self) -> DispatchHook:
        return DispatchHook(
            self.kubernetes_conn_id,
            cluster_context=self.cluster_context,
            config_file=self.config_file,
            in_cluster=self.in_cluster,
        )

    def check_inputs(self) -> None:
        """Validate the parameters as rendered, before the connection is used or anything is sent: a template
        that rendered `None` or nothing is a refusal (AirflowFailException), never another meaning."""
        raise NotImplementedError

    def adapter(self) -> DispatchAdapter:
        """The writer adapter (one client per task run: the hook's)."""
        return self.hook.get_adapter(**self.conflict_options())

    def log_cluster(self, namespace: str) -> None:
        """Say in the task's log which cluster this task writes to, as whom, and from which connection."""
        self.log.info("%s", self.hook.cluster_target().describe(namespace))

    def conflict_options(self) -> dict[str, Any]:
        """The adapter's conflict options: this operator's bound, and each retry said in the task's log."""
        return {"conflict_attempts": self.conflict_attempts, "on_conflict": self._log_conflict}

    def _log_conflict(self, retry: ConflictRetry) -> None:
        self.log.info("%s", retry.describe())

    def target(self) -> tuple[Ref, tuple[str, str] | None]:
        """The TrainJob's ref, and (job id, submission) when known before it exists (open's manifest)."""
        raise NotImplementedError

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """OpenLineage facets when the provider is installed (lineage.py): the TrainJob, the execution."""
        return trainjob_lineage(self.target()[0], task_instance)


class TrainJobHoldOperator(TrainJobOperator):
    """Hold TrainJob `namespace/name` (both templated); XCom: its current execution identity."""

    template_fields: Sequence[str] = ("namespace", "name")

    def __init__(self, *, namespace: str, name: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.namespace = namespace
        self.name = name

    def check_inputs(self) -> None:
        with airflow_errors():
            parse_ref(f"{self.namespace}/{self.name}")

    def target(self) -> tuple[Ref, tuple[str, str] | None]:
        with airflow_errors():
            return parse_ref(f"{self.namespace}/{self.name}"), None

    def execute(self, context: Context) -> dict[str, Any]:
        self.check_inputs()
        with airflow_errors():
            ref = parse_ref(f"{self.namespace}/{self.name}")
            adapter = self.adapter()
            self.log_cluster(ref.namespace)
            execution = adapter.hold(ref)
        self.log.info("Held TrainJob %s (execution %s)", ref, execution.admission)
        return execution.as_dict()


class AdmittingOperator(TrainJobOperator):
    """What release and open share: the wait-or-retry choice, the deferral, the record of the admission.

    :param on_pods_remaining: `"wait"` (default) or `"retry"` (module docstring).
    :param deferrable: with `"wait"`, wait in the triggerer (default `[operators] default_deferrable`).
    :param poke_interval: seconds between checks of a non-deferrable wait.
    :param wait_timeout: the longest wait for the pods (seconds or timedelta; None: `[sensors] default_timeout`).
    :param observe_timeout: the longest in-worker wait for the hold to be observed, seconds.
    :param recheck_interval: the trigger's safety-net re-check interval, seconds.
    :param settle_seconds: how long a hold settles before an admission (dispatch/evidence.py; 90 by default).
    :param accepted_risks: runtime risks accepted by name (`pod-replacement`, `jobset-restart`; dispatch/policy.py).
    :param clock_skew_seconds: the bound assumed on how far two API server replicas' clocks differ, added to every
        wait that compares two times the API server wrote (dispatch/nodes.py; 10 by default).
    :param require_pod_fence: refuse an admission unless dispatch's pod fence was in force for the whole execution
        it ends (dispatch/fence.py; off by default: the admission is then logged as made on the record alone).
    """

    def __init__(
        self,
        *,
        on_pods_remaining: OnPodsRemaining = "wait",
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        poke_interval: float = 30.0,
        wait_timeout: float | timedelta | None = None,
        observe_timeout: float = 60.0,
        recheck_interval: float = DEFAULT_RECHECK_INTERVAL,
        settle_seconds: float = DEFAULT_SETTLE_SECONDS,
        accepted_risks: Collection[str] = (),
        clock_skew_seconds: float = DEFAULT_CLOCK_SKEW_SECONDS,
        require_pod_fence: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.accepted_risks = tuple(sorted(validate_accepted_risks(accepted_risks)))
        if isinstance(settle_seconds, bool) or not 0 <= float(settle_seconds) <= 3600:
            raise ValueError(f"settle_seconds must be a number of seconds from 0 to 3600, not {settle_seconds!r}")
        self.settle_seconds = float(settle_seconds)
        if isinstance(clock_skew_seconds, bool) or not 0 <= float(clock_skew_seconds) <= 3600:
            raise ValueError(
                f"clock_skew_seconds must be a number of seconds from 0 to 3600, not {clock_skew_seconds!r}"
            )
        self.clock_skew_seconds = float(clock_skew_seconds)
        if not isinstance(require_pod_fence, bool):
            raise ValueError(f"require_pod_fence must be True or False, not {require_pod_fence!r}")
        self.require_pod_fence = require_pod_fence
        if on_pods_remaining not in ("wait", "retry"):
            raise ValueError(f"on_pods_remaining must be 'wait' or 'retry', not {on_pods_remaining!r}")
        if wait_timeout is None:
            wait_timeout = conf.getfloat("sensors", "default_timeout")
        seconds = wait_timeout.total_seconds() if isinstance(wait_timeout, timedelta) else float(wait_timeout)
        if seconds < 0 or poke_interval <= 0 or observe_timeout < 0:
            raise ValueError("wait_timeout and observe_timeout must be >= 0, and poke_interval > 0")
        self.on_pods_remaining: OnPodsRemaining = on_pods_remaining
        self.deferrable = deferrable
        self.poke_interval = float(poke_interval)
        self.wait_timeout = seconds
        self.observe_timeout = float(observe_timeout)
        self.recheck_interval = float(recheck_interval)
        self._shown_reason: str | None = None

    def adapter(self) -> DispatchAdapter:
        """The writer adapter with this operator's settle and accepted risks (one client per task run)."""
        # conflicts are retried here, not in the adapter: each retry consults the record of the admission first
        return self.hook.get_adapter(
            settle_seconds=self.settle_seconds,
            accepted_risks=frozenset(self.accepted_risks),
            clock_skew_seconds=self.clock_skew_seconds,
            require_pod_fence=self.require_pod_fence,
            conflict_attempts=1,
        )

    # --- for subclasses ------------------------------------------------------------------------------------

    def admit(self, adapter: DispatchAdapter, ref: Ref) -> Execution:
        """The one call that may admit (release or open)."""
        raise NotImplementedError

    def admit_kueue(self, context: Context, adapter: DispatchAdapter, obj: ManagedObject) -> Execution:
        """Kueue mode. The hook point for waiting until the Workload is `Admitted` (DESIGN §6): today the
        release reactivates the Workload and returns the current execution; Kueue admits it when the admission
        check controller reports the pods gone. Extend here to defer until `Admitted` and return the new A."""
        return self.admit(adapter, obj.ref)

    # --- the attempt ---------------------------------------------------------------------------------------

    def check_inputs(self) -> None:
        self.target()

    def execute(self, context: Context) -> dict[str, Any]:
        self.check_inputs()
        return self.attempt(context)

    def attempt(self, context: Context) -> dict[str, Any]:
        """Release now, or wait (poll or defer) or raise, per `on_pods_remaining`."""
        adapter = self.adapter()
        self.log_cluster(self.target()[0].namespace)
        observe = Backoff(OBSERVE_BACKOFF)
        observe_until = time.monotonic() + self.observe_timeout
        conflicts = 0
        while True:
            try:
                execution = self._admit_once(context, adapter)
            except ConflictError as error:
                # the whole attempt again, from the record and the first read (dispatch/conflicts.py)
                conflicts += 1
                operation = "open" if isinstance(self, TrainJobOpenOperator) else "release"
                if conflicts >= self.conflict_attempts:
                    raise airflow_exception(persistent(operation, self.conflict_attempts, error)) from error
                now = adapter.run(state_after(str(error.ref)))
                self._log_conflict(
                    ConflictRetry(operation, str(error.ref), conflicts, self.conflict_attempts, error.message, now)
                )
                continue
            except HoldSettlingError as error:
                if self.on_pods_remaining == "retry":
                    raise airflow_exception(error) from error
                self._show_reason(reasons.settling(str(self.target()[0]), error.seconds_left, error.message))
                wait = self.settle_wait(error.seconds_left)
                if self.deferrable:
                    self.defer(
                        trigger=TimeDeltaTrigger(timedelta(seconds=wait)),
                        method_name="settled_complete",
                        timeout=timedelta(seconds=wait) + DEFERRAL_MARGIN,
                    )
                left = self.deadline(context) - time.time()
                if left <= 0:
                    raise AirflowException(self._timeout_message(error.message)) from error
                time.sleep(min(wait, left))
                continue
            except SuspensionNotObservedError as error:
                delay = observe.next_delay()
                if self.on_pods_remaining == "retry" or time.monotonic() + delay > observe_until:
                    raise airflow_exception(error) from error
                # usual after every create or hold: said as what is awaited; what exactly, only if it lasts
                self.log.info("%s", reasons.observing(str(self.target()[0]), delay))
                if observe.failures > QUIET_OBSERVE_CHECKS:
                    self.log.info("The hold is still not observed: %s", error)
                time.sleep(delay)
                continue
            except PodsRemainError as error:
                if self.on_pods_remaining == "retry":
                    raise airflow_exception(error) from error
                self._show_reason(error.reason)
                known = remaining_fingerprint(error.remaining)
                if self.deferrable:
                    self._defer(context, known)
                left = self.deadline(context) - time.time()
                if left <= 0:
                    raise AirflowException(self._timeout_message(error.message)) from error
                time.sleep(min(self.poke_interval, left))
                continue
            except DispatchError as error:
                raise airflow_exception(error) from error
            self.log.info("%s", released_line(str(self.target()[0]), execution))
            return execution.as_dict()

    def _admit_once(self, context: Context, adapter: DispatchAdapter) -> Execution:
        ref, known_ids = self.target()
        records = ExecutionRecords(context, self.log)
        obj, held = self._read(adapter, ref, missing_ok=known_ids is not None)
        recorded = records.expected(str(ref))
        if recorded is not None and obj is not None and recorded.reached_by(obj):
            self.log.info(
                "TrainJob %s already reached admission %s (recorded by an earlier try before its admitting write; "
                "now %s, %s): returning execution %s without admitting again",
                ref,
                recorded.admission,
                obj.admission,
                "held" if held else "not held",
                obj.admission,
            )
            records.forget()
            return obj.execution
        if obj is not None and obj.mode is Mode.KUEUE:
            return self.admit_kueue(context, adapter, obj)
        wrote_record = False
        # an open in Kueue mode admits nothing (Kueue does, through dispatch's admission check): nothing to record
        if records.available and (obj is None or held) and not (obj is None and self.opens_in_kueue()):
            ids = (obj.job_id, obj.submission) if obj is not None else known_ids
            if ids is not None:
                records.record(
                    ExpectedExecution(
                        ref=str(ref),
                        uid=obj.uid if obj is not None else None,
                        job_id=ids[0],
                        submission=ids[1],
                        admission=(obj.admission if obj is not None else 0) + 1,
                    )
                )
                wrote_record = True
        execution = self.admit(adapter, ref)
        if wrote_record or recorded is not None:
            records.forget()
        return execution

    def opens_in_kueue(self) -> bool:
        """Whether this operator creates a TrainJob that Kueue admits (its manifest names a queue)."""
        return False

    @staticmethod
    def _read(adapter: DispatchAdapter, ref: Ref, *, missing_ok: bool) -> tuple[ManagedObject | None, bool]:
        """The object as dispatch manages it and whether it is held; (None, False) when missing (open) or
        not managed (open: the open itself refuses a namesake)."""
        try:
            trainjob = adapter.run(programs.read_trainjob(ref))
        except NotFoundError:
            if missing_ok:
                return None, False
            raise
        try:
            return managed(trainjob), is_held(trainjob)
        except NotManagedError:
            if missing_ok:
                return None, False
            raise

    # --- waiting -------------------------------------------------------------------------------------------

    def deadline(self, context: Context) -> float:
        """Epoch seconds at which the wait for the pods gives up: the task's start plus `wait_timeout`."""
        start = getattr(context["ti"], "start_date", None)
        started = start.timestamp() if isinstance(start, datetime) else time.time()
        return started + self.wait_timeout

    def settle_wait(self, seconds_left: float) -> float:
        """How long to wait before looking at a settling hold again (`seconds_left` as the error says)."""
        # the time left is on the API server's clock (whole seconds): look again then, or after poke_interval if
        # sooner (a lab's clock may run faster than this worker's)
        return min(seconds_left + 1.0, self.poke_interval)

    def quiet_until(self) -> float | None:
        """Epoch seconds until which the pods trigger holds back progress (`triggers.base`); None: it does not."""
        return None

    def _show_reason(self, reason: WaitReason) -> None:
        """Log the wait reason in full when it changed, else its first line (`dispatch.reasons`)."""
        text = reason.text()
        if text != self._shown_reason:
            self.log.info("%s", text)
            self._shown_reason = text
        else:
            self.log.info("%s", reason.short)

    def _timeout_message(self, reason: str) -> str:
        return f"Gave up waiting after wait_timeout={self.wait_timeout:.0f}s; nothing was admitted. {reason}"

    def pods_drained_trigger(
        self, ref: Ref, known: str | None, deadline: float, *, accept_ceased: bool, stop_when_running: bool = False
    ) -> PodsDrainedTrigger:
        """The triggerer's wait for `ref`'s pods to go, through this operator's connection, answering by
        `deadline` (epoch seconds); `known` is the fingerprint of the wait reason last shown."""
        return PodsDrainedTrigger(
            ref.namespace,
            ref.name,
            accept_ceased=accept_ceased,
            stop_when_running=stop_when_running,
            known_fingerprint=known,
            deadline=deadline,
            quiet_until=self.quiet_until(),
            recheck_interval=self.recheck_interval,
            **self.hook.trigger_connection_kwargs(),
        )

    def defer_until(self, trigger: BaseTrigger, method_name: str, deadline: float) -> NoReturn:
        """Defer to `trigger`, which answers by `deadline` (epoch seconds); the deferral's own timeout is later."""
        left = timedelta(seconds=max(0.0, deadline - time.time()))
        self.defer(trigger=trigger, method_name=method_name, timeout=left + DEFERRAL_MARGIN)

    def _defer(self, context: Context, known: str | None) -> NoReturn:
        ref = self.target()[0]
        deadline = self.deadline(context)
        trigger = self.pods_drained_trigger(ref, known, deadline, accept_ceased=False, stop_when_running=True)
        self.defer_until(trigger, "execute_complete", deadline)

    def settled_complete(self, context: Context, event: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Resume after the hold settled (a `TimeDeltaTrigger`): release, the whole check running again."""
        self.log.info("The hold has settled; releasing (the check runs again)")
        return self.attempt(context)

    def execute_complete(self, context: Context, event: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Resume from `PodsDrainedTrigger`: release (re-checking) when drained, ceased, running or on progress
        (a check of the worker's own, which records what it sees and defers again if pods remain), or raise."""
        event = event or {}
        status = event.get("status")
        if status == "error":
            raise exception_for_event(event)
        found = event.get("report")
        report: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        if status == "timeout":
            # the PodsRemainError message's first lines (the same explanation), then the report's detail
            count = report.get("remaining_count")
            reason = not_admitted_reason(
                str(report.get("headline") or ""),
                [str(line) for line in report.get("how") or ()],
                str(self.target()[0]),
                count if isinstance(count, int) else 0,
                str(report.get("detail", "")),
            )
            raise AirflowException(self._timeout_message(reason.text()))
        if status == "progress":
            # what the trigger saw changed: a writer's check of its own, which keeps in the hold's record what it
            # sees (a pod on its node, a Node found deleted: dispatch/fencing.py `grown`), then admits or defers
            # again with the new state
            self.log.info("The trigger reported a change; checking again (what the check sees is recorded)")
            return self.attempt(context)
        if status not in ("drained", "running", "ceased"):
            raise AirflowException(f"PodsDrainedTrigger sent an event this operator does not know: {status!r}")
        self.log.info("The trigger reported %s; releasing (the check runs again)", status)
        return self.attempt(context)


class TrainJobReleaseOperator(AdmittingOperator):
    """Release TrainJob `namespace/name` (both templated); XCom: the admitted execution identity.

    Parameters: `AdmittingOperator` (`on_pods_remaining`, `deferrable`, `poke_interval`, `wait_timeout`,
    `observe_timeout`, `recheck_interval`) and `TrainJobOperator` (the connection).
    """

    template_fields: Sequence[str] = ("namespace", "name")

    def __init__(self, *, namespace: str, name: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.namespace = namespace
        self.name = name

    def target(self) -> tuple[Ref, tuple[str, str] | None]:
        with airflow_errors():
            return parse_ref(f"{self.namespace}/{self.name}"), None

    def admit(self, adapter: DispatchAdapter, ref: Ref) -> Execution:
        return adapter.release(ref)


class TrainJobOpenOperator(AdmittingOperator):
    """Open a TrainJob from `manifest` (templated; a dict, or its YAML/JSON text): create it held, release it.

    The manifest needs `metadata.name`, `metadata.namespace` and the dispatch labels `job-id` and `submission`
    (DESIGN §2). Parameters otherwise as for `TrainJobReleaseOperator`.
    """

    template_fields: Sequence[str] = ("manifest",)

    def __init__(self, *, manifest: Mapping[str, Any] | str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.manifest = manifest

    def parsed_manifest(self) -> Mapping[str, Any]:
        value = self.manifest
        if isinstance(value, str):
            try:
                value = yaml.safe_load(value)
            except yaml.YAMLError as error:
                raise AirflowFailException(f"the TrainJob manifest is not YAML or JSON: {error}") from None
        if not isinstance(value, Mapping):
            raise AirflowFailException(
                "the TrainJob manifest must be a mapping (a dict, or its YAML/JSON text), not "
                f"{type(value).__name__}{rendered_nothing(self.manifest)}; nothing was read or written"
            )
        return value

    def target(self) -> tuple[Ref, tuple[str, str] | None]:
        manifest = self.parsed_manifest()
        with airflow_errors():
            ref, body = programs.prepare_manifest(manifest)
        found = labels_of(body)
        return ref, (found[LABEL_JOB_ID], found[LABEL_SUBMISSION])

    def opens_in_kueue(self) -> bool:
        with airflow_errors():
            _, body = programs.prepare_manifest(self.parsed_manifest())
        return LABEL_KUEUE_QUEUE_NAME in labels_of(body)

    def admit(self, adapter: DispatchAdapter, ref: Ref) -> Execution:
        return adapter.open(self.parsed_manifest(), ref=ref)


__all__ = [
    "AdmittingOperator",
    "OnPodsRemaining",
    "TrainJobHoldOperator",
    "TrainJobOpenOperator",
    "TrainJobOperator",
    "TrainJobReleaseOperator",
]
