"""The benchmark harness: a lab in its own process, client work measured in fresh processes, ratio tables.

The pieces, each reusable by any benchmark (drain check cost, detection latency, triggerer capacity, ...):

* `lab_process.LabProcess`: the lab (`benchmarks.harness.lab_launcher`) in a child process, so that the CPU and
  memory a benchmark measures are the client's alone; with the lab's request/byte meter (`lab/apiserver/metering.py`,
  `GET /lab/metrics`) and bulk seeding (`lab/apiserver/seeding.py`, `POST /lab/seed`), and the lab process's own CPU;
* `workers.run_worker` / `workers.serve`: run one measured case in a fresh Python process (JSON in, JSON out),
  so that no case inherits another's heap, caches or peak RSS;
* `measure.measure`: client CPU (`time.process_time`), wall time, requests and bytes at the server, peak heap
  (`tracemalloc`, in a run of its own) and peak RSS growth, over repeated runs within a time budget;
* `meter.Traffic`: requests and bytes, read from the lab and subtracted;
* `report`: ratios (baseline / candidate), number formatting, Markdown tables, the machine's description.
* `held.held_trainjob`: the held TrainJob with one Terminating pod whose drain the latency benchmarks time.
"""
