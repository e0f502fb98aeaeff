"""A real Airflow 3 deployment on loopback: api-server, scheduler (LocalExecutor), dag-processor, triggerer.

Each component is its own `airflow ...` process of the test's Python (so it imports the provider installed in
the same environment), sharing one temporary `AIRFLOW_HOME` and one sqlite metadata database. Airflow 3.3.2
runs the LocalExecutor on sqlite (it only checks the sqlite library's version: `airflow/configuration.py`
`_validate_sqlite3_version`; research airflow.md §3 ran the triggerer restart on that set-up); the DAG
processor is a separate command in Airflow 3, and task workers reach the database only through the
api-server's Execution API (`[core] execution_api_server_url`, research airflow.md §5).

Everything a component could otherwise make up for itself is fixed here, because they must agree: the Fernet key
(trigger kwargs are stored encrypted), the JWT secret (the scheduler signs the workers' Execution API tokens,
the api-server checks them) and the api secret key. Servers listen on loopback only: the api-server on a free
port; the log servers of the scheduler and the triggerer are not started (`--skip-serve-logs`, they would bind
every interface), and the api-server reads the task and trigger log files from the shared log folder, which is
where they are on one machine anyway (`FileTaskHandler._read`).

The environment starts from the test's own with every `AIRFLOW*` variable removed: tests/airflow's conftest
points the test process at its own home, and none of that may leak into this deployment.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deployment.airflow_rest import AirflowApiError, AirflowRest
from deployment.processes import Service, free_port, wait_until

#: the components, in start order; each is `airflow <argv...>`
COMPONENTS: dict[str, list[str]] = {
    "api-server": ["api-server", "--workers", "1"],
    "dag-processor": ["dag-processor"],
    "scheduler": ["scheduler", "--skip-serve-logs"],
    "triggerer": ["triggerer", "--skip-serve-logs"],
}
#: the components the api-server's health endpoint reports, and must report healthy
HEALTH_COMPONENTS = ("metadatabase", "scheduler", "triggerer", "dag_processor")
#: seconds a writer of the sqlite metadata database waits for its lock (`create`): more than sqlite's 5 s, which a
#: loaded machine exceeds, and less than a REST client's timeout (`airflow_rest.REQUEST_TIMEOUT`), so that no
#: client gives up on (and sends again) a request still waiting for the lock: at 120 s ten soak triggers piled up
#: behind one lock for two minutes and every chain's trigger timed out
SQLITE_BUSY_SECONDS = 20
#: bounds (seconds) that only fail the test: the api-server alone takes ~35-40 s here (research §5)
MIGRATE_BOUND = 300.0
READY_BOUND = 240.0


def _fernet_key() -> str:
    from cryptography.fernet import Fernet

    return Fernet.generate_key().decode()


@dataclass
class AirflowStack:
    """`AirflowStack.create(...)`, `.migrate()`, `.start()`, `.wait_ready()`, ..., `.stop()`."""

    home: Path
    log_dir: Path
    env: dict[str, str]
    api_port: int
    services: list[Service] = field(default_factory=list)

    @classmethod
    def create(
        cls,
        home: Path,
        log_dir: Path,
        dags_folder: Path,
        connections: Mapping[str, Mapping[str, Any]],
        settings: Mapping[str, str] | None = None,
    ) -> AirflowStack:
        """`settings`: more `AIRFLOW__...` variables (the restart soak's concurrency), applied last."""
        api_port = free_port()
        base_url = f"http://127.0.0.1:{api_port}"
        env = {key: value for key, value in os.environ.items() if not key.startswith("AIRFLOW")}
        env.update(
            {
                "AIRFLOW_HOME": str(home),
                "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
                "AIRFLOW__CORE__PARALLELISM": "4",
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder),
                "AIRFLOW__CORE__FERNET_KEY": _fernet_key(),
                "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{base_url}/execution/",
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
                "AIRFLOW__API__HOST": "127.0.0.1",
                "AIRFLOW__API__PORT": str(api_port),
                "AIRFLOW__API__BASE_URL": base_url,
                "AIRFLOW__API__SECRET_KEY": secrets.token_urlsafe(32),
                "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),
                "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
                # never started (--skip-serve-logs), but never a port something else on the machine holds
                "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
                "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
                "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
                # a task's worker parses its DAG file before it runs; on a loaded 2-core machine that can pass the
                # 30 s default, and the try is then rescheduled during startup
                "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "120",
                # the dag-processor's parse of a file is stopped after 50 s by default, and a DAG not parsed for
                # 50 s goes stale: at load 10 a parse took minutes, the DAG showed import errors (a trigger: 400)
                # or went stale (404). Longer than the import timeout above.
                "AIRFLOW__DAG_PROCESSOR__DAG_FILE_PROCESSOR_TIMEOUT": "300",
                "AIRFLOW__DAG_PROCESSOR__STALE_DAG_THRESHOLD": "300",
                "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "False",
                "AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE": "False",
                "PYTHONUNBUFFERED": "1",
            }
        )
        # sqlite's busy timeout: a writer waits this long for the lock instead of failing with "database is
        # locked" (the default 5 s; five processes on a loaded 2-core machine hold it longer: the dag-processor
        # exited on it once). `[database] sql_alchemy_connect_args` names a dict to import, from the home.
        home.mkdir(parents=True, exist_ok=True)
        (home / "dispatch_stack_sqlite.py").write_text(f"CONNECT_ARGS = {{'timeout': {SQLITE_BUSY_SECONDS}}}\n")
        env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS"] = "dispatch_stack_sqlite.CONNECT_ARGS"
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(home), env.get("PYTHONPATH", "")) if p)
        env.update(settings or {})
        for conn_id, connection in connections.items():
            env[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps(dict(connection))
        log_dir.mkdir(parents=True, exist_ok=True)
        return cls(home, log_dir, env, api_port)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    @property
    def rest(self) -> AirflowRest:
        return AirflowRest(self.base_url)

    def _argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "airflow", *args]

    def migrate(self) -> None:
        log = self.log_dir / "db-migrate.log"
        with log.open("wb") as out:
            done = subprocess.run(
                self._argv("db", "migrate"),
                env=self.env,
                cwd=self.home,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=MIGRATE_BOUND,
                check=False,
            )
        if done.returncode != 0:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:])
            raise AssertionError(f"airflow db migrate exited {done.returncode}; {log} ends:\n{tail}")

    def start(self) -> None:
        for name, args in COMPONENTS.items():
            service = Service(name, self._argv(*args), self.env, self.log_dir / f"{name}.log", self.home)
            self.services.append(service.start())

    def health(self) -> dict[str, Any] | None:
        try:
            return self.rest.health()
        except (OSError, AirflowApiError):  # not listening yet, or answering 5xx while it starts
            return None

    def wait_ready(self, bound: float = READY_BOUND) -> dict[str, Any]:
        """Until the api-server answers and reports every component's heartbeat healthy."""
        last: list[dict[str, Any] | None] = [None]

        def ready() -> dict[str, Any] | None:
            health = last[0] = self.health()
            if health is None:
                return None
            healthy = all((health.get(name) or {}).get("status") == "healthy" for name in HEALTH_COMPONENTS)
            return health if healthy else None

        return wait_until(
            "the Airflow components to report healthy",
            ready,
            bound=bound,
            services=self.services,
            describe=lambda: json.dumps(last[0]),
        )

    def wait_for_dag(self, dag_id: str, dag_file: str, bound: float = READY_BOUND) -> dict[str, Any]:
        """Until the DAG processor has parsed and serialized `dag_id`; an import error of `dag_file` (a file
        name) fails at once, and those of other files are named if the DAG never comes."""
        errors: list[dict[str, Any]] = []

        def parsed() -> dict[str, Any] | None:
            errors[:] = self.rest.import_errors()
            for error in errors:
                if Path(str(error.get("filename", ""))).name == dag_file:
                    raise AssertionError(f"{dag_file} did not import: {error.get('stack_trace')}")
            return self.rest.dag(dag_id)

        return wait_until(
            f"DAG {dag_id} to be parsed",
            parsed,
            bound=bound,
            services=self.services,
            describe=lambda: f"import errors: {json.dumps(errors)[:4000]}",
        )

    def service(self, name: str) -> Service:
        found = [service for service in self.services if service.name == name]
        if not found:
            raise KeyError(f"no component {name} started (components: {[s.name for s in self.services]})")
        return found[-1]

    def restart(self, name: str) -> Service:
        """Stop one component (SIGTERM to its group, then SIGKILL) and start it again as a new process, its log
        continued: what an operator's restart or a crashed pod's replacement does."""
        old = self.service(name)
        old.stop()
        fresh = Service(name, old.argv, self.env, old.log_path, self.home).start()
        self.services[self.services.index(old)] = fresh
        return fresh

    def wait_run_finished(
        self, dag_id: str, run_id: str, bound: float, describe: Callable[[], str] = lambda: ""
    ) -> dict[str, Any]:
        """Until the DAG run is `success` or `failed`; returns the run."""

        def finished() -> dict[str, Any] | None:
            run = self.rest.dag_run(dag_id, run_id)
            return run if run.get("state") in ("success", "failed") else None

        return wait_until(
            f"run {run_id} of {dag_id} to finish", finished, bound=bound, services=self.services, describe=describe
        )

    def stop(self) -> dict[str, int | None]:
        """Stop the components, the api-server last (the others talk to it while they shut down)."""
        codes = {}
        for service in reversed(self.services):
            codes[service.name] = service.stop()
        return codes

    def report(self, lines: int = 80) -> str:
        """Where every component's log is, and how each ends: printed when a test fails."""
        parts = [f"Airflow home {self.home}; component logs in {self.log_dir}"]
        for service in self.services:
            state = "running" if service.alive else "exited"
            parts.append(
                f"===== {service.name} (pid {service.pid}, {state}): {service.log_path}\n{service.tail(lines)}"
            )
        return "\n".join(parts)


__all__ = ["COMPONENTS", "AirflowStack"]
