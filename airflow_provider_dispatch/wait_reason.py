"""How a waiting task shows why it waits: the sensors' and the restart operator's one way.

The wait reason is visible in the Airflow 3 UI in three places (research airflow.md §4, the only ones that work
while a task waits): the task log (the full reason each time it changes, one short line otherwise), the rendered
field `wait_reason` (a template field of the task, with `overwrite_rtif_after_execution = True`, so the worker
sends it again after every run, including one that deferred), and the XCom `wait_reason`, pushed on every check
and before every deferral (visible while deferred).

The text is `dispatch.reasons.WaitReason`'s, the one composer of every wait reason: its first line says what to do,
or what is awaited, and its subject, short enough to be read whole in each of the three places at 1366x768
(`payloads.GLANCE`). `wait_reason` is the first of the operator's `template_fields`, so the Rendered Templates tab
shows it at the top.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import Context

from airflow_provider_dispatch.dispatch.reasons import WaitReason


class ShowsWaitReason:
    """Mixin for an operator (sensors.base.DispatchSensor, operators.restarts.TrainJobRestartOperator): list
    `wait_reason` in its `template_fields` and set `overwrite_rtif_after_execution = True`."""

    wait_reason: str = ""
    _shown_reason: str | None = None
    log: Any

    def show_wait_reason(self, context: Context, reason: WaitReason) -> None:
        """Log the reason in full when it changed, else its first line; set the rendered field; push the XCom."""
        text = reason.text()
        self.wait_reason = text
        if text != self._shown_reason:
            self.log.info("%s", text)
            self._shown_reason = text
        else:
            self.log.info("%s", reason.short)
        context["ti"].xcom_push(key="wait_reason", value=text)


__all__ = ["ShowsWaitReason"]
