"""The few calls of Airflow 3's public REST API (`/api/v2`) the browser test makes, over plain HTTP on loopback.

The api-server runs with `[core] simple_auth_manager_all_admins = True`, whose middleware gives every request an
admin token (`airflow/api_fastapi/auth/managers/simple/middleware.py`), so no login is needed. Errors are raised
with the status and body, so a failing test says what Airflow answered.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

#: seconds one REST call may take (a bound: sqlite under four processes can be slow, never this slow)
REQUEST_TIMEOUT = 30.0


class AirflowApiError(AssertionError):
    def __init__(self, method: str, url: str, status: int, body: str) -> None:
        super().__init__(f"{method} {url} answered {status}: {body[:2000]}")
        self.status = status


class AirflowRest:
    def __init__(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/")

    def call(self, method: str, path: str, body: Any = None, **query: Any) -> Any:
        url = f"{self.base_url}{path}"
        if query:
            url += "?" + urllib.parse.urlencode(
                {k: str(v).lower() if isinstance(v, bool) else v for k, v in query.items()}
            )
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT) as response:
                text = response.read().decode()
        except urllib.error.HTTPError as error:
            raise AirflowApiError(method, url, error.code, error.read().decode(errors="replace")) from None
        return json.loads(text) if text else None

    # --- the API -------------------------------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        answer: dict[str, Any] = self.call("GET", "/api/v2/monitor/health")
        return answer

    def dag(self, dag_id: str) -> dict[str, Any] | None:
        try:
            answer: dict[str, Any] = self.call("GET", f"/api/v2/dags/{dag_id}")
        except AirflowApiError as error:
            if error.status == 404:
                return None
            raise
        return answer

    def import_errors(self) -> list[dict[str, Any]]:
        answer = self.call("GET", "/api/v2/importErrors")
        return list(answer.get("import_errors") or [])

    def unpause(self, dag_id: str) -> None:
        self.call("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False})

    def trigger(self, dag_id: str, conf: dict[str, Any], run_id: str | None = None) -> str:
        """A manual DAG run with `conf` (and the run id given, if any); returns its run id."""
        body: dict[str, Any] = {"logical_date": None, "conf": conf}
        if run_id is not None:
            body["dag_run_id"] = run_id
        run = self.call("POST", f"/api/v2/dags/{dag_id}/dagRuns", body)
        return str(run["dag_run_id"])

    def dag_run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        answer: dict[str, Any] = self.call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{_q(run_id)}")
        return answer

    def task_instances(self, dag_id: str, run_id: str) -> dict[str, dict[str, Any]]:
        answer = self.call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{_q(run_id)}/taskInstances")
        return {ti["task_id"]: ti for ti in answer["task_instances"]}

    def task_instance(self, dag_id: str, run_id: str, task_id: str) -> dict[str, Any]:
        answer: dict[str, Any] = self.call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{_q(run_id)}/taskInstances/{task_id}")
        return answer

    def xcom(self, dag_id: str, run_id: str, task_id: str, key: str = "return_value") -> Any:
        path = f"/api/v2/dags/{dag_id}/dagRuns/{_q(run_id)}/taskInstances/{task_id}/xcomEntries/{key}"
        return self.call("GET", path, deserialize=True)["value"]

    def clear(self, dag_id: str, run_id: str, task_id: str, *, downstream: bool = False) -> list[dict[str, Any]]:
        """Clear one task of one run, whatever its state (the UI's Clear): a running try is stopped, and the task
        runs again as a new try; with `downstream`, the tasks after it too (what re-running a failed run takes:
        they were marked upstream_failed). Returns the task instances Airflow cleared."""
        body = {
            "dry_run": False,
            "only_failed": False,
            "task_ids": [task_id],
            "dag_run_id": run_id,
            "include_downstream": downstream,
        }
        answer = self.call("POST", f"/api/v2/dags/{dag_id}/clearTaskInstances", body)
        return list(answer.get("task_instances") or [])

    def mark_failed(self, dag_id: str, run_id: str, task_id: str) -> None:
        """Mark one task instance failed (the UI's Mark as failed): a running try is stopped, a deferred one's
        trigger dropped, and no retry follows."""
        path = f"/api/v2/dags/{dag_id}/dagRuns/{_q(run_id)}/taskInstances/{task_id}"
        self.call("PATCH", path, {"new_state": "failed"})

    def log_text(self, dag_id: str, run_id: str, task_id: str, try_number: int) -> str:
        """The task's log for one try as the UI gets it (worker and trigger lines merged), one event a line."""
        path = f"/api/v2/dags/{dag_id}/dagRuns/{_q(run_id)}/taskInstances/{task_id}/logs/{try_number}"
        answer = self.call("GET", path, full_content=True)
        content = answer.get("content") or []
        return "\n".join(str(line.get("event", "")) if isinstance(line, dict) else str(line) for line in content)


def _q(run_id: str) -> str:
    """A run id in a path (manual run ids hold `:` and `+`)."""
    return urllib.parse.quote(run_id, safe="")


__all__ = ["AirflowApiError", "AirflowRest"]
