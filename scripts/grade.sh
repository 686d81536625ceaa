#!/usr/bin/env bash
# Grades the course's exercises with the chapters' own tests: builds what each exercise needs (in
# build/grade, every kernel on the CPU), runs the test cases tagged [gradedNNx] (and simt's race checker
# where it applies) with a time limit per exercise, and prints a table; --json FILE also writes the
# result for a gradebook. In the repository every exercise passes; in a student tree made by
# scripts/make_assignment.py, those the student has done. docs/course.md says more.
#
#   scripts/grade.sh                      every exercise
#   scripts/grade.sh 05 07b              chapter 05's exercises and exercise 07b
#   scripts/grade.sh --json grade.json    the same, and the JSON
#   scripts/grade.sh --help               every option
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if ! command -v python3 >/dev/null 2>&1; then
  echo "error: scripts/grade.sh needs python3 (3.11 or newer): sudo apt-get install -y python3" >&2
  exit 2
fi
exec python3 "$here/course/grade.py" "$@"
