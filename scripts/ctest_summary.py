#!/usr/bin/env python3
"""Passes ctest's output through, but summarizes skipped tests: one line per
skip reason ("298 tests skipped: no GPU: ...") in place of a line per skipped
test and the closing "The following tests did not run:" list, so that the
result ("100% tests passed, 0 tests failed out of N") stays in view.

    ctest --output-junit FILE ... | python3 scripts/ctest_summary.py FILE

The reasons come from FILE, ctest's JUnit report (each skipped test's output:
GTEST_SKIP's message follows the "Skipped" line). Without it, the skips are
counted without reasons.
"""
import collections
import re
import sys
import xml.etree.ElementTree as ET

SKIPPED_PROGRESS = re.compile(r"^\s*\d+/\d+ Test\s+#\d+: .*\*\*\*Skipped\b")
NOT_RUN_HEADER = "The following tests did not run:"
NOT_RUN_ENTRY = re.compile(r"^\s+\d+ - (\S+) \((.*)\)\s*$")


def skip_reason(output):
    """GTEST_SKIP's message: the first non-empty line after 'file:line: Skipped'."""
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if line.rstrip().endswith(": Skipped"):
            for following in lines[i + 1:]:
                if following.strip():
                    return following.strip()
    return None


def reasons_from_junit(path):
    """{test name: reason} for every skipped test in ctest's JUnit report."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return {}
    reasons = {}
    for case in root.iter("testcase"):
        skipped = case.find("skipped")
        if skipped is None:
            continue
        out = case.find("system-out")
        reasons[case.get("name")] = skip_reason(out.text or "" if out is not None else "") or skipped.get(
            "message", "skipped")
    return reasons


def main():
    junit = sys.argv[1] if len(sys.argv) > 1 else None
    not_run = {}  # test name -> ctest's word for it (Skipped, Disabled, Not Run)
    in_not_run = False
    for line in sys.stdin:
        if line.startswith(NOT_RUN_HEADER):
            in_not_run = True
            continue
        if in_not_run:
            entry = NOT_RUN_ENTRY.match(line)
            if entry:
                not_run[entry.group(1)] = entry.group(2)
                continue
            in_not_run = False
        if SKIPPED_PROGRESS.match(line):
            continue
        sys.stdout.write(line)
        sys.stdout.flush()
    if not not_run:
        return
    reasons = reasons_from_junit(junit) if junit else {}
    counts = collections.Counter(reasons.get(name) or word.lower() for name, word in not_run.items())
    print("Tests that did not run, by reason:")
    for reason, count in counts.most_common():
        print(f"  {count} {'test' if count == 1 else 'tests'} skipped: {reason}")


if __name__ == "__main__":
    main()
