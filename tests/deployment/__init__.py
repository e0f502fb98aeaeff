"""A real Airflow 3 deployment on loopback for the tests that need one (tests/browser, the restart soak in
tests/benchmarks): its processes (`processes`), the components (`airflow_stack`) and the REST calls (`airflow_rest`)."""
