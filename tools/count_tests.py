#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Reads meson's testlog.json and prints one line "N passed, N failed" summed over every
# test case: a Catch2 program contributes the case counts of its own summary; a program
# without one counts as one case. A program that failed (crash, timeout, non-zero exit)
# with no failed case in its summary adds one failure, so nothing failing goes uncounted.
import json, re, sys

def counts(stdout):
    m = re.search(r"All tests passed \(\d+ assertions? in (\d+) test cases?\)", stdout)
    if m:
        return int(m.group(1)), 0
    m = re.search(r"test cases:\s*(\d+)\s*\|\s*(?:(\d+) passed\s*\|\s*)?(\d+) failed", stdout)
    if m:
        total, failed = int(m.group(1)), int(m.group(3))
        return total - failed, failed
    return None

passed = failed = 0
try:
    lines = open(sys.argv[1]).read().splitlines()
except OSError:
    lines = []
for line in lines:
    t = json.loads(line)
    ok = t.get("result") in ("OK", "EXPECTEDFAIL")
    if t.get("result") == "SKIP":
        continue
    c = counts(t.get("stdout", "") or "")
    if c is None:
        passed, failed = passed + ok, failed + (not ok)
        continue
    p, f = c
    if not ok and f == 0:
        f = 1
    passed, failed = passed + p, failed + f
if not lines:
    failed = 1  # nothing ran: the build or the setup failed
print(f"{passed} passed, {failed} failed")
