#!/usr/bin/env python3
"""The course kit's check (CI runs it; docs/course.md): the grader can never pass an empty answer.

    scripts/check_course.py [--dir DIR] [--jobs N] [--timeout S] [EXERCISE...]

1. Writes the student tree (scripts/make_assignment.py's) and builds, once, every test program the
   exercises use, GPU path off: every stub compiles, and without a warning in an exercise's file.
2. Grades it as handed out: every exercise fails (a score of 0).
3. Walks through the exercises, chapters from last to first, each chapter's in order, and for each
   exercise X writes the answers of: every exercise of a later chapter, the exercises before X in
   its chapter, and the exercises of earlier chapters that X's chapter runs ("needs" in
   exercises.toml); every other exercise keeps its stub. There, X's tests must FAIL; with X's answer
   written in too, they must PASS. So each exercise's tests fail on its stub and pass on its answer
   while the stubs of the other chapters (but for the declared needs) and of the later exercises of
   its own chapter are in place: no other exercise's stub can cost it its points. An exercise of
   several regions is then answered with one region at a time back to its stub: its tests must
   FAIL each time, so no region of it can be left undone for full marks. Each step rebuilds only
   what the file it rewrote changes (one chapter's kernel or test source).
4. With every answer written back, the tree's files equal the repository's: the stubs were the
   only change.
That the repository itself passes every exercise's tests is what the test workflow checks: they
are the chapters' own test cases. Exit status 0 when all of this holds, 1 when something does not.

Its cost is one build of the test programs (GPU path off, no sanitizer) and one rebuild of one
chapter's sources per exercise. With ccache as the compiler launcher, CCACHE_BASEDIR at the
repository and the tree under its build folder (CI: --dir build/course), step 1 takes the objects
of every file the stubs leave alone from the test workflow's build.
"""

from __future__ import annotations

import argparse
import filecmp
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the tree
sys.path.insert(0, str(Path(__file__).resolve().parent / "course"))
import course  # noqa: E402


def closure(exercises: list[course.Exercise], ids: set[str]) -> set[str]:
    """`ids` with what they rest on: the exercises before each in its chapter, and their needs."""
    by_id = {e.id: e for e in exercises}
    result: set[str] = set()
    todo = list(ids)
    while todo:
        x = todo.pop()
        if x in result:
            continue
        result.add(x)
        e = by_id[x]
        todo.extend(n for n in e.needs)
        todo.extend(o.id for o in exercises if o.chapter == e.chapter and o.number < e.number)
    return result


def answered_before(exercises: list[course.Exercise], x: course.Exercise) -> set[str]:
    """The answers written while X's tests must fail: later chapters, X's predecessors in its chapter,
    and what its chapter's exercises need (with what those rest on)."""
    later = {e.id for e in exercises if e.chapter > x.chapter}
    before = {e.id for e in exercises if e.chapter == x.chapter and e.number < x.number}
    needs = {n for e in exercises if e.chapter == x.chapter for n in e.needs}
    return later | closure(exercises, before | needs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, help="where to write the student tree (default: a temporary folder, "
                        "removed at the end); must not exist or be empty")
    parser.add_argument("--jobs", type=int, help="parallel compile jobs (default: the build tool's own choice)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per exercise's tests (default 120)")
    parser.add_argument("exercises", nargs="*", metavar="EXERCISE",
                        help="step 3 for these exercises only (ids or chapters, as scripts/grade.sh takes them); "
                        "all by default")
    args = parser.parse_args()
    start = time.monotonic()
    failures: list[str] = []

    def log(text: str) -> None:
        print(f"[{time.monotonic() - start:6.1f} s] {text}", flush=True)

    exercises = course.load_catalog()
    with tempfile.TemporaryDirectory(prefix="course-check-") as temporary:
        tree = (args.dir or Path(temporary) / "student").resolve()
        build = tree / "build" / "grade"
        try:
            stubbed = course.write_tree(course.ROOT, tree, exercises)
            log(f"student tree written to {tree}: {len(exercises)} exercises, {stubbed} regions stubbed")
            course.configure(tree, build, log)
        except course.CourseError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        targets = course.known_targets(build)
        programs = sorted({p for e in exercises for p in e.programs + e.racecheck if p in targets})

        # 1. Every stub compiles, without a warning in an exercise's file.
        command = ["cmake", "--build", str(build), "--target", *programs]
        if args.jobs:
            command += ["--parallel", str(args.jobs)]
        result = subprocess.run(command, capture_output=True, text=True)
        output = result.stdout + result.stderr
        if result.returncode != 0:
            print(output[-6000:])
            log("FAIL: the student tree does not compile (above)")
            return 1
        files = {r.path for rs in course.scan(course.ROOT).values() for r in rs}
        warnings = sorted({line.strip() for line in output.splitlines()
                           if "warning:" in line and any(f in line for f in files)})
        for w in warnings:
            failures.append(f"a stub draws a warning: {w}")
        log(f"1. the student tree compiles: {len(programs)} test programs"
            + (f"; {len(warnings)} warnings in exercise files" if warnings else ", no warning in an exercise's file"))

        # 2. As handed out, every exercise fails.
        timings: dict[str, list[float]] = {}
        for e in exercises:
            outcome = course.grade_exercise(build, e, targets, args.timeout, args.jobs)
            if outcome.passed:
                failures.append(f"{e.id} passes on the student tree as handed out")
        log("2. graded as handed out: " + ("every exercise fails" if not any(
            f.endswith("as handed out") for f in failures) else "SOME PASS"))

        # 3. Each exercise on its stub, then with its answer, the other stubs in place.
        try:
            chosen = course.select(exercises, args.exercises)
        except course.CourseError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        order = sorted(chosen, key=lambda e: (-int(e.chapter), e.number[1]))
        region_count = {id_: len(rs) for id_, rs in course.scan(course.ROOT).items()}
        for e in order:
            row = []
            # The stub, the answer, then (for an exercise of several regions) the answer with one region
            # undone, each in turn: every region must be needed, not only the exercise as a whole.
            states = [(False, frozenset()), (True, frozenset())]
            if region_count[e.id] > 1:
                states += [(False, frozenset({(e.id, k)})) for k in range(region_count[e.id])]
            for with_answer, undone in states:
                answered = answered_before(exercises, e) | ({e.id} if with_answer or undone else set())
                step = time.monotonic()
                changed = course.apply_answers(course.ROOT, tree, exercises, answered, undone)
                error = course.build_targets(build, [p for p in e.programs + e.racecheck if p in targets], args.jobs)
                built = time.monotonic() - step
                state = (f"region {next(iter(undone))[1] + 1} of {region_count[e.id]} undone" if undone
                         else "answer" if with_answer else "stub")
                if error and undone:
                    # A region undone that leaves the rest not compiling (05b: the mask uses the `visible`
                    # of its first region) fails the grade too: the grader gives the exercise no points.
                    row.append((built, 0.0, True))
                    log(f"3. {e.id} {state:<21}: rebuilt {', '.join(changed) or 'nothing'} in {built:.1f} s; "
                        f"does not compile, which the grade counts as a FAIL ({error.removeprefix('does not compile: ')})")
                    continue
                if error:
                    failures.append(f"{e.id}: {state} state does not build: {error}")
                    row.append((built, 0.0, False))
                    continue
                outcome = course.grade_exercise(build, e, targets, args.timeout, args.jobs)
                if outcome.passed != with_answer:
                    what = (f"passes with its {state}" if outcome.passed
                            else f"fails with its answer: {outcome.message}")
                    failures.append(f"{e.id} {what} (answered: {', '.join(sorted(answered)) or 'none'})")
                row.append((built, outcome.seconds, outcome.passed == with_answer))
                log(f"3. {e.id} {state:<21}: rebuilt {', '.join(changed) or 'nothing'} "
                    f"in {built:.1f} s; tests {'PASS' if outcome.passed else 'FAIL'} in {outcome.seconds:.1f} s")
            timings[e.id] = [row[0][0], row[0][1], row[1][0], row[1][1]] + [x for r in row[2:] for x in r[:2]]

        # 4. Every answer back: the tree is the repository.
        course.apply_answers(course.ROOT, tree, exercises, {e.id for e in exercises})
        differ = [rel for rel in course.tracked_files(course.ROOT)
                  if (course.ROOT / rel).is_file() and not (course.ROOT / rel).is_symlink()
                  and not filecmp.cmp(course.ROOT / rel, tree / rel, shallow=False)]
        for rel in differ:
            failures.append(f"{rel} differs from the repository with every answer written back")
        log("4. with every answer written back, the tree equals the repository" if not differ else
            f"4. {len(differ)} files differ from the repository")

    print()
    print(f"{'exercise':<9} {'stub: build':>11} {'tests':>6}  {'answer: build':>13} {'tests':>6}  "
          "one region undone, each in turn: build, tests")
    for e in (e for e in exercises if e.id in timings):
        t = timings[e.id]
        undone = "  ".join(f"{t[k]:.1f}s {t[k + 1]:.1f}s" for k in range(4, len(t), 2))
        print(f"{e.id:<9} {t[0]:10.1f}s {t[1]:5.1f}s  {t[2]:12.1f}s {t[3]:5.1f}s  {undone}".rstrip())
    print(f"total: {time.monotonic() - start:.0f} s")
    if failures:
        print("\nFAIL:\n  " + "\n  ".join(failures))
        return 1
    print(f"PASS: the {len(exercises)} stubs compile; each exercise's tests fail on its stub and pass on its answer "
          "with the other chapters' stubs (but declared needs) and its chapter's later stubs in place; an exercise "
          "of several regions fails with any one of them undone")
    return 0


if __name__ == "__main__":
    sys.exit(main())
