"""Fail unless a pytest JUnit report ran at least one test and none failed: `python3 .ci/junit_check.py REPORT`.

pytest's own exit status already fails CI on a failure or on no test collected (its exit 5); this check also
catches a report that counts no test at all, and prints the figures each CI run logs.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET

report = sys.argv[1]
root = ET.parse(report).getroot()
suites = [root] if root.tag == "testsuite" else list(root)
tests = sum(int(s.get("tests", 0)) for s in suites)
failed = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
skipped = sum(int(s.get("skipped", 0)) for s in suites)
print(f"ci: {report}: {tests} tests, {failed} failed, {skipped} skipped")
if tests == 0 or failed:
    sys.exit(1)
