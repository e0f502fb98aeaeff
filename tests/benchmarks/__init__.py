"""Benchmarks: measured as ratios against a baseline measured in the same run (docs/performance.md).

Run as scripts (`python tests/benchmarks/drain_check.py ...`); the `test_*` modules here are quick smoke runs at
small scale that keep the scripts from rotting, with no timed assertions.
"""
