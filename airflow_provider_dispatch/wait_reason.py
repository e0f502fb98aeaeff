"""How a waiting task shows why it waits: the sensors' and the restart operator's one way.

The wait reason is visible in the Airflow 3 UI in three places (research airflow.md §4, the only ones that work
while a task waits): the task log (the full reason each time it changes, one short line otherwise), the rendered
field `wait_reason` (a template field of the task, with `overwrite_rtif_after_execution = True`, so the worker
sends it again after every run, including one that deferred), and the XCom `wait_reason`, pushed on every check
and before every deferral (visible while deferred).
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import Context


class ShowsWaitReason:
    """Mixin for an operator (sensors.base.DispatchSensor, operators.restarts.TrainJobRestartOperator): list
    `wait_reason` in its `template_fields` and set `overwrite_rtif_after_execution = True`."""

    wait_reason: str = ""
    _shown_reason: str | None = None
    log: Any

    def show_wait_reason(self, context: Context, reason: str, short: str) -> None:
        """Log the reason in full when it changed, else `short`; set the rendered field; push the XCom."""
        self.wait_reason = reason
        if reason != self._shown_reason:
            self.log.info("%s", reason)
            self._shown_reason = reason
        else:
            self.log.info("%s", short)
        context["ti"].xcom_push(key="wait_reason", value=reason)


__all__ = ["ShowsWaitReason"]
