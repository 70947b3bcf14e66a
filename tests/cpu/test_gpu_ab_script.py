"""scripts/gpu-ab with no build (-B) and a command that records where it ran:
the two trees alternate which goes first, each runs from its own root with
its own cache directory (the same one every round), every run has its log,
a failed run fails the script, and bad usage is refused. Also the old tree
exported from a revision, -s (both trees on the first run's tuning
records), the round, tree and logs' folder the command sees, and each
tree's tuning records listed after the rounds. Usage: test_gpu_ab_script.py REPO_ROOT"""
import os
import subprocess
import sys
import tempfile

RECORD = 'echo "$PWD $CUJIT_CACHE_DIR" >> "$CALLS"'


def run(root, tmp, args, extra_env=None):
    env = dict(os.environ, OUT=os.path.join(tmp, "out"), AB_DIR=os.path.join(tmp, "ab"),
               CALLS=os.path.join(tmp, "calls"), CUJIT_CACHE_TOOL=os.path.join(tmp, "no-cache-tool"))
    env.update(extra_env or {})
    return subprocess.run([os.path.join(root, "scripts", "gpu-ab")] + args, env=env, capture_output=True, text=True)


def main():
    root = os.path.realpath(sys.argv[1])
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        old = os.path.join(tmp, "old-tree")
        os.makedirs(old)
        result = run(root, tmp, ["-d", old, "-B", "-n", "3", "--", "sh", "-c", RECORD])
        if result.returncode != 0:
            failures.append(f"exit status {result.returncode}: {result.stderr}")
        calls = [line.split() for line in open(os.path.join(tmp, "calls")).read().splitlines()]
        trees = [c[0] for c in calls]
        if trees != [root, old, old, root, root, old]:
            failures.append(f"the rounds do not alternate new/old, old/new, new/old: {trees}")
        caches = {tree: {c[1] for c in calls if c[0] == tree} for tree in (root, old)}
        if any(len(c) != 1 for c in caches.values()) or caches[root] == caches[old]:
            failures.append(f"each tree should keep one cache directory of its own: {caches}")
        logs = sorted(os.listdir(os.path.join(tmp, "out")))
        expected = sorted(f"ab-{r}-{side}.log" for r in (1, 2, 3) for side in ("new", "old"))
        if logs != expected:
            failures.append(f"logs {logs}, expected {expected}")
        if "=== round 2, old: rc=0" not in result.stdout:
            failures.append(f"no summary line per run: {result.stdout}")

        # A run that fails fails the script; the other runs still happen.
        os.remove(os.path.join(tmp, "calls"))
        result = run(root, tmp, ["-d", old, "-B", "-n", "1", "--", "sh", "-c",
                                 RECORD + '; [ "$PWD" != "' + old + '" ]'])
        if result.returncode != 1 or len(open(os.path.join(tmp, "calls")).read().splitlines()) != 2:
            failures.append(f"a failed run: exit status {result.returncode}, {result.stdout}")

        # The old tree from a revision: exported once, the command run in it.
        os.remove(os.path.join(tmp, "calls"))
        result = run(root, tmp, ["-r", "HEAD", "-B", "-n", "1", "--", "sh", "-c",
                                 RECORD + "; test -f CMakeLists.txt"])
        calls = [line.split() for line in open(os.path.join(tmp, "calls")).read().splitlines()]
        exported = [c[0] for c in calls if c[0] != root]
        if result.returncode != 0 or len(exported) != 1 or not os.path.basename(exported[0]).startswith("tree-"):
            failures.append(f"-r HEAD: exit status {result.returncode}, runs in {calls}: {result.stderr}")

        # -s: the tuning records of round 1's first run reach the other tree's
        # cache before its first run, so both trees time the same configs.
        # Without -s each tree tunes its own.
        tune = ('mkdir -p "$CUJIT_CACHE_DIR/tuning"; r="$CUJIT_CACHE_DIR/tuning/r.json"; '
                'if [ -f "$r" ]; then echo "$PWD $(cat "$r")" >> "$CALLS"; '
                'else echo "$PWD" > "$r"; echo "$PWD tuned" >> "$CALLS"; fi')
        for same, expected in ((True, [[root, "tuned"], [old, root], [old, root], [root, root]]),
                               (False, [[root, "tuned"], [old, "tuned"], [old, old], [root, root]])):
            os.remove(os.path.join(tmp, "calls"))
            result = run(root, tmp, ["-d", old, "-B"] + (["-s"] if same else []) + ["-n", "2", "--", "sh", "-c", tune])
            calls = [line.split() for line in open(os.path.join(tmp, "calls")).read().splitlines()]
            if result.returncode != 0 or calls != expected:
                failures.append(f"-s {same}: exit status {result.returncode}, runs {calls}, expected {expected}: "
                                f"{result.stdout} {result.stderr}")

        # After the rounds, each tree's tuning records are listed by the cache
        # tool, into a file per tree; a tree that left none has no file.
        tool = os.path.join(tmp, "fake-cujit-cache")
        with open(tool, "w") as f:
            f.write('#!/bin/sh\necho "listed $*"\n')
        os.chmod(tool, 0o755)
        tune_new_only = '[ "$AB_SIDE" = new ] && mkdir -p "$CUJIT_CACHE_DIR/tuning"; true'
        for name in os.listdir(os.path.join(tmp, "out")):
            os.remove(os.path.join(tmp, "out", name))
        result = run(root, tmp, ["-d", old, "-B", "-n", "1", "--", "sh", "-c", tune_new_only],
                     {"CUJIT_CACHE_TOOL": tool})
        listing = os.path.join(tmp, "out", "ab-tuning-new.txt")
        text = open(listing).read() if os.path.exists(listing) else ""
        if (result.returncode != 0 or f"listed --dir {os.path.join(tmp, 'ab', 'cache-new')} tuning --top 0" not in text
                or os.path.exists(os.path.join(tmp, "out", "ab-tuning-old.txt"))):
            failures.append(f"tuning listings: exit status {result.returncode}, {text!r}, "
                            f"{sorted(os.listdir(os.path.join(tmp, 'out')))}")

        # The command knows its round, its tree and the logs' folder.
        os.remove(os.path.join(tmp, "calls"))
        result = run(root, tmp, ["-d", old, "-B", "-n", "2", "--", "sh", "-c",
                                 'echo "$AB_ROUND $AB_SIDE $AB_OUT" >> "$CALLS"'])
        calls = open(os.path.join(tmp, "calls")).read().splitlines()
        out = os.path.join(tmp, "out")
        if result.returncode != 0 or calls != [f"1 new {out}", f"1 old {out}", f"2 old {out}", f"2 new {out}"]:
            failures.append(f"AB_ROUND, AB_SIDE, AB_OUT: exit status {result.returncode}, {calls}")

        for args, what in ((["-B"], "no command"), (["-n", "0", "-B", "--", "true"], "zero rounds"),
                           (["-r", "no-such-revision", "-B", "--", "true"], "a bad revision"),
                           (["-d", os.path.join(tmp, "missing"), "-B", "--", "true"], "a missing directory")):
            result = run(root, tmp, args)
            if result.returncode != 2 or "gpu-ab: " not in result.stderr:
                failures.append(f"{what}: exit status {result.returncode}, stderr {result.stderr!r}")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
