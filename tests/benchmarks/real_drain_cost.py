"""The drain check's cost to the real API server and etcd at several namespace sizes (docs/performance.md §1).

    python tests/benchmarks/real_drain_cost.py --pods 10000,50000 --json docs/benchmark-results/real-drain.json

or, from `tests/`, `python -m benchmarks.real_drain_cost ...`. Needs the built control plane
(`DISPATCH_CONTROLPLANE_BIN`, or `controlplane/build`); starts etcd and kube-apiserver only; see
`real_drain_bench.py`.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: make `benchmarks` importable

from benchmarks.real_drain_bench import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
