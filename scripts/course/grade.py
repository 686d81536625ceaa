"""scripts/grade.sh: grades the course's exercises with the chapters' own tests (docs/course.md)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the tree
sys.path.insert(0, str(Path(__file__).resolve().parent))
import course  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/grade.sh",
        description="Builds and runs, for each exercise, the test cases that grade it (the Catch2 tag [exNN.k] in "
        "its chapter's tests, and simt's race checker where it applies), every kernel on the CPU, then prints "
        "a table: exercise, points, passed or failed, and for a failure the first test's message and a hint. "
        "Exit status 0 when every exercise graded passed, 1 when one failed, 2 for a bad argument.")
    parser.add_argument("exercises", nargs="*", metavar="EXERCISE",
                        help="exercise ids (05.1) or chapters (05); all exercises when none is given")
    parser.add_argument("--json", type=Path, metavar="FILE",
                        help="also write the result as JSON for a gradebook: {exercises: [{id, chapter, title, "
                        "points, passed, message}], score, total}")
    parser.add_argument("--build-dir", type=Path, default=course.ROOT / "build" / "grade",
                        help="the build folder (default: build/grade; configured from the default preset, GPU path "
                        "off, the first time)")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds each exercise's tests may run before it counts as failed (default 120)")
    parser.add_argument("--jobs", type=int, help="parallel compile jobs (default: the build tool's own choice)")
    parser.add_argument("--no-hints", action="store_true", help="leave the hints out of the table")
    parser.add_argument("--list", action="store_true", help="list the exercises and exit")
    args = parser.parse_args()
    if args.timeout <= 0:
        parser.error(f"--timeout {args.timeout:g}: give a positive number of seconds")
    if args.jobs is not None and args.jobs < 1:
        parser.error(f"--jobs {args.jobs}: give 1 or more")
    try:
        exercises = course.select(course.load_catalog(), args.exercises)
        if args.list:
            for e in exercises:
                print(f"{e.id}  {e.points} points  {e.minutes:3d} min  {e.title}")
            return 0
        course.stub_index(course.load_catalog(), course.ROOT)  # the markers match the catalog
        build = args.build_dir.resolve()
        course.configure(course.ROOT, build, lambda line: print(line, file=sys.stderr))
        targets = course.known_targets(build)
    except course.CourseError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    outcomes = {}
    for e in exercises:
        print(f"grading {e.id}: {e.title} ...", file=sys.stderr, flush=True)
        outcomes[e.id] = course.grade_exercise(build, e, targets, args.timeout, args.jobs)
    print(course.table(exercises, outcomes, hints=not args.no_hints))
    if args.json:
        course.write_json(args.json, course.report_json(exercises, outcomes))
        print(f"wrote {args.json}")
    return 0 if all(o.passed for o in outcomes.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
