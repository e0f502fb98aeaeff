"""The `dispatch` command, one room: its group and commands, their options, how a read runs and prints.

`commands` is the group (`dispatch = airflow_provider_dispatch.cli.commands:main`) with `status`, `find`, `list`,
`pod-fence` and `admission-controller`; `options` the kubectl-shaped options they share and `durations` the
timeouts those read; `report` runs a read once or with `--watch` (`watch`) and prints it as `status_view` and
`list_view` lay it out; `extras` is the one seam to the lab, whose commands (`dispatch lab`, `dispatch demo`) the
group finds through the lab's entry points, and the line that says what to install without it. No Airflow import
anywhere here, so that the command starts in a fraction of the time `airflow` takes. This file re-exports
nothing.
"""
