#!/usr/bin/env python3
"""Writes the student tree of the course kit (docs/course.md).

    scripts/make_assignment.py DIR [--git]

DIR receives a copy of this repository's files (those git tracks, as they are in the working tree;
no history), in which every exercise region of the chapters' sources (a line `// graded NNx:
<task>`, the answer, a line `// end graded`) holds the stub of scripts/course/exercises.toml
instead of the answer: code that compiles and leaves the output NaN or zeros. The marker lines stay,
so each region still states its task. Nothing else changes. With --git, DIR becomes a git repository
with the tree as its one commit, ready to push to the course's own repository. The student then runs
scripts/grade.sh there.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the tree
sys.path.insert(0, str(Path(__file__).resolve().parent / "course"))
import course  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] + " DIR must not exist, or be empty.")
    parser.add_argument("dir", type=Path, metavar="DIR", nargs="?", help="where to write the student tree")
    parser.add_argument("--git", action="store_true",
                        help="make DIR a git repository whose one commit is the student tree (branch 'assignment')")
    parser.add_argument("--check", action="store_true",
                        help="only check that the markers and scripts/course/exercises.toml agree; write nothing")
    args = parser.parse_args()
    try:
        exercises = course.load_catalog()
        if args.check:
            regions = course.scan(course.ROOT)
            course.check_catalog(exercises, regions)
            print(f"{len(exercises)} exercises, {sum(len(r) for r in regions.values())} marked regions: they agree "
                  "with the catalog")
            return 0
        if args.dir is None:
            parser.error("give DIR, the folder to write the student tree to")
        dest = args.dir.resolve()
        if dest == course.ROOT or course.ROOT in dest.parents:
            raise course.CourseError(f"{args.dir} is inside the repository: give a folder outside it")
        stubbed = course.write_tree(course.ROOT, dest, exercises)
    except course.CourseError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"wrote the student tree to {dest}: {len(exercises)} exercises, {stubbed} regions stubbed, "
          f"{sum(e.points for e in exercises)} points")
    if args.git:
        for command in (["git", "init", "-q", "-b", "assignment"], ["git", "add", "-A"],
                        ["git", "-c", "user.name=course", "-c", "user.email=course@localhost", "commit", "-q", "-m",
                         "The assignment: every exercise region holds its stub"]):
            subprocess.run(command, cwd=dest, check=True)
        print(f"{dest} is a git repository with one commit, on branch 'assignment'")
    print("the student runs scripts/grade.sh there (docs/course.md)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
