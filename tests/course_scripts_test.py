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
      // graded 05a: write out[i]
      out[i] = 2.0f * i;
      // end graded
      if (i == 0) {
        // graded 05b: the tail
        out[n - 1] = 1.0f;
        // end graded
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
                         [("05a", 2, 4, "  ", "write out[i]"), ("05b", 6, 8, "    ", "the tail")])

    def refused(self, text, rel="chapters/05_x/k.cuh"):
        with self.assertRaises(course.CourseError) as caught:
            course.scan_file(rel, text)
        return str(caught.exception)

    def test_a_marker_without_its_end_is_refused_with_its_line(self):
        self.assertIn("k.cuh:1: exercise 05a has no '// end graded'", self.refused("// graded 05a: x\ny;\n"))

    def test_an_end_without_a_marker_is_refused(self):
        self.assertIn("k.cuh:2: '// end graded' without", self.refused("y;\n// end graded\n"))

    def test_a_region_inside_a_region_is_refused(self):
        text = "// graded 05a: a\n// graded 05b: b\n// end graded\n// end graded\n"
        self.assertIn("k.cuh:2: exercise 05b opens inside exercise 05a", self.refused(text))

    def test_an_exercise_outside_its_chapter_is_refused(self):
        text = "// graded 06a: a\ny;\n// end graded\n"
        self.assertIn("marked outside chapter 06's folder", self.refused(text))

    def test_a_misspelt_marker_is_refused(self):
        self.assertIn("must read '// graded NNx: <task>'", self.refused("// graded 5a a\n"))

    def test_stubs_must_match_the_regions(self):
        regions = {"05a": course.scan_file("chapters/05_x/k.cuh", KERNEL)[:1]}
        with self.assertRaises(course.CourseError) as caught:
            course.check_catalog([exercise("05a", ["a", "b"])], regions)
        self.assertIn("exercise 05a has 2 stubs for 1 marked regions", str(caught.exception))
        with self.assertRaises(course.CourseError):
            course.check_catalog([exercise("05a", ["a"]), exercise("05b", ["b"])], regions)


class StudentTree(unittest.TestCase):
    def setUp(self):
        self.exercises = [exercise("05a", ["// write it\n(void)i;"]), exercise("05b", [""])]
        self.by_id = {e.id: e for e in self.exercises}
        self.regions = course.scan_file("chapters/05_x/k.cuh", KERNEL)

    def test_each_region_becomes_its_stub_indented_as_its_marker(self):
        out = course.render(KERNEL, self.regions, self.by_id, set())
        self.assertEqual(out, KERNEL.replace("  out[i] = 2.0f * i;\n", "  // write it\n  (void)i;\n")
                         .replace("    out[n - 1] = 1.0f;\n", ""))

    def test_one_region_of_an_answered_exercise_can_be_undone(self):
        two = [exercise("05a", ["// first", "// second"])]
        text = "// graded 05a: a\nx = 1;\n// end graded\n// graded 05a: b\ny = 2;\n// end graded\n"
        regions = course.scan_file("chapters/05_x/k.cuh", text)
        out = course.render(text, regions, {"05a": two[0]}, {"05a"}, frozenset({("05a", 1)}))
        self.assertEqual(out, text.replace("y = 2;", "// second"))

    def test_an_answered_region_keeps_its_lines_and_all_answered_is_the_file(self):
        self.assertEqual(course.render(KERNEL, self.regions, self.by_id, {"05a", "05b"}), KERNEL)
        self.assertIn("out[i] = 2.0f * i;", course.render(KERNEL, self.regions, self.by_id, {"05a"}))

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
            self.assertIn("// graded 05a: write out[i]\n  // write it\n  (void)i;\n  // end graded", student)
            self.assertNotIn("2.0f", student)
            self.assertEqual(course.apply_answers(repo, dest, self.exercises, {"05a"}), ["chapters/05_x/k.cuh"])
            self.assertEqual(course.apply_answers(repo, dest, self.exercises, {"05a"}), [])  # nothing to rewrite
            course.apply_answers(repo, dest, self.exercises, {"05a", "05b"})
            self.assertEqual((dest / "chapters" / "05_x" / "k.cuh").read_text(), KERNEL)
            with self.assertRaises(course.CourseError):
                course.write_tree(repo, dest, self.exercises)  # not empty


class GradeCopy(unittest.TestCase):
    """The grade's copy: an exercise whose lines do not compile gets its stub there, and the compiler's
    file and line are given back as the student's."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        root = Path(self.tmp.name) / "student"
        (root / "chapters" / "05_x").mkdir(parents=True)
        (root / "build").mkdir()
        (root / "build" / "old.o").write_text("not copied")
        student = KERNEL.replace("out[i] = 2.0f * i;", "out[i] = oops;")
        (root / "chapters" / "05_x" / "k.cuh").write_text(student)
        self.exercises = [exercise("05a", ["// write it\n(void)i;\n(void)out;"]), exercise("05b", [""])]
        self.tree = course.GradeTree(root, Path(self.tmp.name) / "grade", self.exercises)
        self.tree.sync()

    def tearDown(self):
        self.tmp.cleanup()

    def test_the_copy_holds_the_students_files_and_not_the_build(self):
        self.assertIn("out[i] = oops;", (self.tree.src / "chapters/05_x/k.cuh").read_text())
        self.assertFalse((self.tree.src / "build").exists())

    def test_a_grade_folder_inside_a_plain_tree_is_not_copied_into_itself(self):
        root = self.tree.root
        inside = course.GradeTree(root, root / "grading", self.exercises)
        inside.sync()
        inside.sync()
        self.assertTrue((root / "grading" / "src" / "chapters/05_x/k.cuh").exists())
        self.assertFalse((root / "grading" / "src" / "grading").exists())

    def test_an_error_in_a_region_is_that_exercises_with_the_students_line(self):
        path = self.tree.src / "chapters/05_x/k.cuh"
        output = (f"[3/9] Building CXX object k.o\nFAILED: k.o\n{path}:4:12: error: 'oops' was not declared in "
                  "this scope\n")
        self.assertEqual(self.tree.attribute(output),
                         ("05a", "does not compile: chapters/05_x/k.cuh:4: error: 'oops' was not declared in this scope"))

    def test_an_error_seen_through_its_instantiation_is_the_regions(self):
        path = self.tree.src / "chapters/05_x/k.cuh"
        output = (f"{path}: In instantiation of 'void k()':\n{path}:4:5:   required from here\n"
                  "common/simt/simt.h:40:3: error: no match\n")
        self.assertEqual(self.tree.attribute(output)[0], "05a")

    def test_an_error_outside_every_region_is_nobodys(self):
        path = self.tree.src / "chapters/05_x/k.cuh"
        self.assertIsNone(self.tree.attribute(f"{path}:2:3: error: expected ';'\n")[0])

    def test_with_the_exercise_stubbed_lines_below_map_back_to_the_students(self):
        self.tree.stubbed["05a"] = "does not compile"
        self.tree._write("chapters/05_x/k.cuh")
        copy = (self.tree.src / "chapters/05_x/k.cuh").read_text()
        self.assertIn("(void)out;", copy)
        self.assertNotIn("oops", copy)
        # The copy's line of `out[n - 1] = 1.0f;` (one line lower: the stub has 3 lines for 1) is the
        # student's line 8, in 05b's region.
        at = copy.split("\n").index("    out[n - 1] = 1.0f;") + 1
        self.assertEqual(self.tree.where(str(self.tree.src / "chapters/05_x/k.cuh"), at),
                         ("chapters/05_x/k.cuh", 8, "05b"))


CATCH_FAILED = """<?xml version="1.0" encoding="UTF-8"?>
<Catch name="05_test" filters="[graded05a]">
  <Group name="05_test">
    <TestCase name="passes" tags="[ch05][graded05a]" filename="t.cpp" line="1">
      <OverallResult success="true"/>
    </TestCase>
    <TestCase name="O agrees" tags="[ch05][graded05a]" filename="t.cpp" line="9">
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
<Catch name="05_test" filters="[graded05a]">
  <Group name="05_test">
    <TestCase name="O agrees" tags="[ch05][graded05a]" filename="t.cpp" line="9">
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
        exercises = [exercise("05a", ["a"]), exercise("05b", ["b"]), exercise("06a", ["c"])]
        self.assertEqual([e.id for e in course.select(exercises, ["06", "05b"])], ["05b", "06a"])
        self.assertEqual(len(course.select(exercises, [])), 3)
        with self.assertRaises(course.CourseError):
            course.select(exercises, ["09z"])

    def test_the_json_has_the_gradebook_keys(self):
        exercises = [exercise("05a", ["a"]), exercise("05b", ["b"])]
        outcomes = {"05a": course.Outcome(True, "", 1.0), "05b": course.Outcome(False, "05_test: failed", 2.0)}
        report = json.loads(json.dumps(course.report_json(exercises, outcomes)))
        self.assertEqual(set(report), {"exercises", "score", "total"})
        self.assertEqual(report["exercises"][1], {"id": "05b", "chapter": "05", "title": "title 05b", "points": 2,
                                                  "passed": False, "message": "05_test: failed",
                                                  "build_seconds": 0.0, "test_seconds": 2.0})
        self.assertEqual((report["score"], report["total"]), (2, 4))
        table = course.table(exercises, outcomes)
        self.assertIn("its tests also run the lines of", course.table(
            exercises, {"05a": course.Outcome(False, "x", 0), "05b": course.Outcome(False, "y", 0)}))
        self.assertIn("score: 2 of 4 points, 1 of 2 exercises passed", table)


if __name__ == "__main__":
    unittest.main()
