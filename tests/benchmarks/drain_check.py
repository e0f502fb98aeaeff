"""Cost of one drain check at several namespace sizes, against the baseline, in one run (docs/performance.md).

    python tests/benchmarks/drain_check.py --pods 1000,10000,50000 [--json out.json] [--markdown out.md]

Runs the lab in a child process and every measured case in a fresh worker process; see `drain_bench.py`.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: make `benchmarks` importable

from benchmarks.drain_bench import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
