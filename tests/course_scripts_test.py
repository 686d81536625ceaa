#!/usr/bin/env python3
"""Tests of the course kit's scripts (scripts/course/course.py) on made-up files, without a build:
the markers of the repository agree with the catalog; a marker that is not closed, or closed twice,
or in another chapter's folder, is refused with its file and line; a student tree holds each stub
where its region was and everything else unchanged; the grader reads the first failure out of a
Catch2 report, a crash's included; the JSON has the gradebook's keys. (What the stubs do when built
and graded is scripts/check_course.py's part.)

  python3 tests/course_scripts_test.py        (CTest: course_scripts, label course)
"""
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "course"))
import course  # noqa: E402

KERNEL = textwrap.dedent("""\
    __global__ void k(float* out, int n) {
      const int i = threadIdx.x;
      // exercise 05.1: write out[i]
      out[i] = 2.0f * i;
      // end exercise
      if (i == 0) {
        // exercise 05.2: the tail
        out[n - 1] = 1.0f;
        // end exercise
      }
    }
    """)


def exercise(id_, stubs):
    return course.Exercise(id_, f"title {id_}", 2, 10, ["05_test"], [], [], "a hint",
                           [course.stub_lines(s) for s in stubs])


class Markers(unittest.TestCase):
    def test_the_repository_agrees_with_the_catalog(self):
        course.check_catalog(course.load_catalog(), course.scan(course.ROOT))

    def test_regions_are_found_with_their_ids_tasks_and_lines(self):
        regions = course.scan_file("chapters/05_x/k.cuh", KERNEL)
        self.assertEqual([(r.id, r.marker, r.end, r.indent, r.task) for r in regions],
                         [("05.1", 2, 4, "  ", "write out[i]"), ("05.2", 6, 8, "    ", "the tail")])

    def refused(self, text, rel="chapters/05_x/k.cuh"):
        with self.assertRaises(course.CourseError) as caught:
            course.scan_file(rel, text)
        return str(caught.exception)

    def test_a_marker_without_its_end_is_refused_with_its_line(self):
        self.assertIn("k.cuh:1: exercise 05.1 has no '// end exercise'", self.refused("// exercise 05.1: x\ny;\n"))

    def test_an_end_without_a_marker_is_refused(self):
        self.assertIn("k.cuh:2: '// end exercise' without", self.refused("y;\n// end exercise\n"))

    def test_a_region_inside_a_region_is_refused(self):
        text = "// exercise 05.1: a\n// exercise 05.2: b\n// end exercise\n// end exercise\n"
        self.assertIn("k.cuh:2: exercise 05.2 opens inside exercise 05.1", self.refused(text))

    def test_an_exercise_outside_its_chapter_is_refused(self):
        text = "// exercise 06.1: a\ny;\n// end exercise\n"
        self.assertIn("marked outside chapter 06's folder", self.refused(text))

    def test_a_misspelt_marker_is_refused(self):
        self.assertIn("must read '// exercise NN.k: <task>'", self.refused("// exercise 5.1 a\n"))

    def test_stubs_must_match_the_regions(self):
        regions = {"05.1": course.scan_file("chapters/05_x/k.cuh", KERNEL)[:1]}
        with self.assertRaises(course.CourseError) as caught:
            course.check_catalog([exercise("05.1", ["a", "b"])], regions)
        self.assertIn("exercise 05.1 has 2 stubs for 1 marked regions", str(caught.exception))
        with self.assertRaises(course.CourseError):
            course.check_catalog([exercise("05.1", ["a"]), exercise("05.2", ["b"])], regions)


class StudentTree(unittest.TestCase):
    def setUp(self):
        self.exercises = [exercise("05.1", ["// write it\n(void)i;"]), exercise("05.2", [""])]
        self.by_id = {e.id: e for e in self.exercises}
        self.regions = course.scan_file("chapters/05_x/k.cuh", KERNEL)

    def test_each_region_becomes_its_stub_indented_as_its_marker(self):
        out = course.render(KERNEL, self.regions, self.by_id, set())
        self.assertEqual(out, KERNEL.replace("  out[i] = 2.0f * i;\n", "  // write it\n  (void)i;\n")
                         .replace("    out[n - 1] = 1.0f;\n", ""))

    def test_an_answered_region_keeps_its_lines_and_all_answered_is_the_file(self):
        self.assertEqual(course.render(KERNEL, self.regions, self.by_id, {"05.1", "05.2"}), KERNEL)
        self.assertIn("out[i] = 2.0f * i;", course.render(KERNEL, self.regions, self.by_id, {"05.1"}))

    def test_the_tree_is_the_repository_but_for_the_stubs(self):
        with tempfile.TemporaryDirectory() as tmp:
            repo = Path(tmp) / "repo"
            (repo / "chapters" / "05_x").mkdir(parents=True)
            (repo / "chapters" / "05_x" / "k.cuh").write_text(KERNEL)
            (repo / "README.md").write_text("read me\n")
            (repo / "untracked.txt").write_text("not in git\n")
            subprocess.run(["git", "init", "-q", str(repo)], check=True)
            subprocess.run(["git", "-C", str(repo), "add", "chapters", "README.md"], check=True)
            dest = Path(tmp) / "student"
            self.assertEqual(course.write_tree(repo, dest, self.exercises), 2)
            self.assertEqual((dest / "README.md").read_text(), "read me\n")
            self.assertFalse((dest / "untracked.txt").exists())
            student = (dest / "chapters" / "05_x" / "k.cuh").read_text()
            self.assertIn("// exercise 05.1: write out[i]\n  // write it\n  (void)i;\n  // end exercise", student)
            self.assertNotIn("2.0f", student)
            self.assertEqual(course.apply_answers(repo, dest, self.exercises, {"05.1"}), ["chapters/05_x/k.cuh"])
            self.assertEqual(course.apply_answers(repo, dest, self.exercises, {"05.1"}), [])  # nothing to rewrite
            course.apply_answers(repo, dest, self.exercises, {"05.1", "05.2"})
            self.assertEqual((dest / "chapters" / "05_x" / "k.cuh").read_text(), KERNEL)
            with self.assertRaises(course.CourseError):
                course.write_tree(repo, dest, self.exercises)  # not empty


CATCH_FAILED = """<?xml version="1.0" encoding="UTF-8"?>
<Catch name="05_test" filters="[ex05.1]">
  <Group name="05_test">
    <TestCase name="passes" tags="[ch05][ex05.1]" filename="t.cpp" line="1">
      <OverallResult success="true"/>
    </TestCase>
    <TestCase name="O agrees" tags="[ch05][ex05.1]" filename="t.cpp" line="9">
      <Info>seq_len_q 1, seq_len_k 192</Info>
      <Info>O: rel L2 0.5; bound 1e-06</Info>
      <Expression success="false" type="CHECK" filename="t.cpp" line="12">
        <Original>fa::agrees(err, bound)</Original>
        <Expanded>false</Expanded>
      </Expression>
      <OverallResult success="false"/>
    </TestCase>
    <OverallResults successes="3" failures="1" expectedFailures="0"/>
  </Group>
  <OverallResults successes="3" failures="1" expectedFailures="0"/>
</Catch>
"""

CATCH_CRASHED = """<?xml version="1.0" encoding="UTF-8"?>
<Catch name="05_test" filters="[ex05.1]">
  <Group name="05_test">
    <TestCase name="O agrees" tags="[ch05][ex05.1]" filename="t.cpp" line="9">
      <FatalErrorCondition filename="t.cpp" line="9">
        SIGSEGV - Segmentation violation signal
      </FatalErrorCondition>
"""


class Grade(unittest.TestCase):
    def test_the_first_failure_with_its_messages_and_values(self):
        self.assertEqual(course.first_failure(CATCH_FAILED, "05_test"),
                         '05_test: "O agrees": seq_len_q 1, seq_len_k 192; O: rel L2 0.5; bound 1e-06; '
                         "CHECK(fa::agrees(err, bound)) with false")

    def test_a_crash_names_the_signal(self):
        self.assertEqual(course.first_failure(CATCH_CRASHED, "05_test"),
                         '05_test: "O agrees": SIGSEGV - Segmentation violation signal')

    def test_exercises_are_chosen_by_id_or_chapter_in_order(self):
        exercises = [exercise("05.1", ["a"]), exercise("05.2", ["b"]), exercise("06.1", ["c"])]
        self.assertEqual([e.id for e in course.select(exercises, ["06", "05.2"])], ["05.2", "06.1"])
        self.assertEqual(len(course.select(exercises, [])), 3)
        with self.assertRaises(course.CourseError):
            course.select(exercises, ["09.1"])

    def test_the_json_has_the_gradebook_keys(self):
        exercises = [exercise("05.1", ["a"]), exercise("05.2", ["b"])]
        outcomes = {"05.1": course.Outcome(True, "", 1.0), "05.2": course.Outcome(False, "05_test: failed", 2.0)}
        report = json.loads(json.dumps(course.report_json(exercises, outcomes)))
        self.assertEqual(set(report), {"exercises", "score", "total"})
        self.assertEqual(report["exercises"][1], {"id": "05.2", "chapter": "05", "title": "title 05.2", "points": 2,
                                                  "passed": False, "message": "05_test: failed"})
        self.assertEqual((report["score"], report["total"]), (2, 4))
        table = course.table(exercises, outcomes)
        self.assertIn("its tests also run the lines of", course.table(
            exercises, {"05.1": course.Outcome(False, "x", 0), "05.2": course.Outcome(False, "y", 0)}))
        self.assertIn("score: 2 of 4 points, 1 of 2 exercises passed", table)


if __name__ == "__main__":
    unittest.main()
