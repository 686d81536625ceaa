"""scripts/grade.sh: grades the course's exercises with the chapters' own tests (docs/course.md)."""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the tree
sys.path.insert(0, str(Path(__file__).resolve().parent))
import course  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/grade.sh",
        description="Builds and runs, for each exercise, the test cases that grade it (the Catch2 tag [gradedNNx] in "
        "its chapter's tests, and simt's race checker where it applies), every kernel on the CPU, then prints "
        "a table: exercise, points, passed or failed, and for a failure the first test's message and a hint. "
        "Exit status 0 when every exercise graded passed, 1 when one failed, 2 for a bad argument.")
    parser.add_argument("exercises", nargs="*", metavar="EXERCISE",
                        help="exercise ids (05a) or chapters (05); all exercises when none is given")
    parser.add_argument("--json", type=Path, metavar="FILE",
                        help="also write the result as JSON for a gradebook: {exercises: [{id, chapter, title, "
                        "points, passed, message, build_seconds, test_seconds}], score, total}")
    parser.add_argument("--build-dir", type=Path, default=course.ROOT / "build" / "grade",
                        help="the grade's folder (default: build/grade): src/, a copy of this tree in which an exercise "
                        "that does not compile holds its stub, and build/, its build, configured from the default "
                        "preset with the GPU path off the first time")
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
        catalog = course.load_catalog()
        course.stub_index(catalog, course.ROOT)  # the markers match the catalog
        tree = course.GradeTree(course.ROOT, args.build_dir.resolve(), catalog)
        tree.sync()
        tree.configure(lambda line: print(line, file=sys.stderr))
        targets = course.known_targets(tree.binary)
    except course.CourseError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    progress = Progress()
    outcomes = {}
    for e in exercises:
        print(f"grading {e.id}: {e.title} ...", file=sys.stderr, flush=True)
        progress.start(e.id)

        def builder(programs, exercise=e):
            error = tree.build(programs, args.jobs, progress)
            progress.done()
            # Its own lines did not compile: their stubs stand in (for the other exercises), but this
            # exercise fails with the error, whatever its stubs' tests say.
            return tree.stubbed.get(exercise.id) or error

        outcomes[e.id] = course.grade_exercise(tree.binary, e, targets, args.timeout, args.jobs, builder)
    print(course.table(exercises, outcomes, hints=not args.no_hints))
    chosen = {e.id for e in exercises}
    for id_, error in sorted(tree.stubbed.items()):
        if id_ not in chosen:
            print(f"note: {id_} does not compile ({error.removeprefix('does not compile: ')}); its stub stood in "
                  "for it while the exercises above were graded")
    if args.json:
        course.write_json(args.json, course.report_json(exercises, outcomes))
        print(f"wrote {args.json}")
    return 0 if all(o.passed for o in outcomes.values()) else 1


class Progress:
    """The build's progress on stderr: on a terminal one line that counts up; else a line a step."""

    def __init__(self):
        self.tty = sys.stderr.isatty()
        self.started = time.monotonic()
        self.exercise = ""
        self.shown = False

    def start(self, exercise: str) -> None:
        self.exercise = exercise
        self.started = time.monotonic()

    def __call__(self, done: int, total: int, what: str) -> None:
        line = f"  building for {self.exercise}: [{done}/{total}] {time.monotonic() - self.started:5.0f} s  {what}"
        if self.tty:
            width = shutil.get_terminal_size().columns - 1
            sys.stderr.write("\r" + line[:width].ljust(width))
            self.shown = True
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def done(self) -> None:
        if self.shown:
            sys.stderr.write("\n")
            sys.stderr.flush()
            self.shown = False

if __name__ == "__main__":
    sys.exit(main())
