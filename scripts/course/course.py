"""The course kit, shared by scripts/make_assignment.py, scripts/grade.sh and scripts/check_course.py.

An exercise is one or more regions of a chapter's source, each opened by a line
`// graded NNx: <task>` and closed by a line `// end graded`; exercises.toml (beside this file)
says what each exercise is worth, which test cases grade it (the Catch2 tag [gradedNNx] in the chapter's
test programs) and what the student tree holds in each region instead (the stub).

Three things are built on that:
  - the student tree: a copy of the repository's files without its history, each region's lines
    replaced by its stub (the marker lines stay: the first states the task);
  - the grade: per exercise, the chapter's tests of that exercise built and run (and simt's race
    checker where it applies), each with a time limit, as a table and as JSON for a gradebook;
  - the course check (check_course.py): stubs compile, every exercise fails on its stub and passes
    with its answer, whatever the other exercises hold.
Python 3.11 or newer (tomllib).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    sys.exit("error: the course kit needs Python 3.11 or newer (for tomllib); this is Python "
             f"{sys.version.split()[0]}")

ROOT = Path(__file__).resolve().parents[2]
CATALOG = Path(__file__).resolve().parent / "exercises.toml"

MARKER = re.compile(r"^(?P<indent>[ \t]*)// graded (?P<id>\d\d[a-z]): (?P<task>\S.*)$")
END = re.compile(r"^[ \t]*// end graded$")
ID = re.compile(r"^(\d\d)([a-z])$")
SOURCE_SUFFIXES = {".h", ".cuh", ".cpp", ".cu"}
RACECHECK_TAG = "[racecheck]"  # the test cases of a chapter's NN_racecheck_test


class CourseError(Exception):
    """A marker, the catalog or an argument is wrong: one line that says what and where."""


# ---------------------------------------------------------------------------------------------
# The catalog and the marked regions


@dataclasses.dataclass
class Exercise:
    id: str
    title: str
    points: int
    minutes: int
    programs: list[str]
    racecheck: list[str]
    needs: list[str]
    hint: str
    stubs: list[str]

    @property
    def chapter(self) -> str:
        return self.id[:2]

    @property
    def tag(self) -> str:
        return f"[graded{self.id}]"

    @property
    def number(self) -> tuple[int, int]:
        chapter, letter = ID.match(self.id).groups()
        return int(chapter), ord(letter) - ord("a") + 1


@dataclasses.dataclass
class Region:
    id: str
    path: str  # relative to the tree's root, with '/'
    marker: int  # index of the marker line
    end: int  # index of the `// end graded` line
    indent: str
    task: str


def load_catalog(path: Path = CATALOG) -> list[Exercise]:
    """The exercises of exercises.toml in the order of their ids. Raises CourseError when an entry
    misses a field or has one of the wrong kind."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise CourseError(f"{path}: {e}") from e
    exercises = []
    for entry in data.get("exercise", []):
        where = f"{path.name}, exercise {entry.get('id', '?')}"
        for key, kind in (("id", str), ("title", str), ("points", int), ("minutes", int), ("programs", list),
                          ("hint", str), ("stubs", list)):
            if not isinstance(entry.get(key), kind):
                raise CourseError(f"{where}: '{key}' must be given, a {kind.__name__}")
        if not ID.match(entry["id"]):
            raise CourseError(f"{where}: the id must be NNx (chapter NN, then a letter: 05a, 05b, ...)")
        exercises.append(
            Exercise(entry["id"], entry["title"], entry["points"], entry["minutes"], list(entry["programs"]),
                     list(entry.get("racecheck", [])), list(entry.get("needs", [])), entry["hint"],
                     [stub_lines(s) for s in entry["stubs"]]))
    ids = [e.id for e in exercises]
    if len(set(ids)) != len(ids):
        raise CourseError(f"{path.name}: an id is listed twice")
    known = set(ids)
    for e in exercises:
        for n in e.needs:
            if n not in known or n[:2] == e.chapter:
                raise CourseError(f"{path.name}, exercise {e.id}: needs '{n}', which is not an exercise of "
                                  "another chapter")
    return sorted(exercises, key=lambda e: e.number)


def stub_lines(text: str) -> list[str]:
    """A stub from the catalog as its lines, without the first and last empty lines."""
    lines = text.split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def source_files(root: Path) -> list[str]:
    """The chapters' source files of a tree, relative to its root, sorted."""
    chapters = root / "chapters"
    found = []
    for dirpath, _, names in os.walk(chapters):
        for name in names:
            if Path(name).suffix in SOURCE_SUFFIXES:
                found.append((Path(dirpath) / name).relative_to(root).as_posix())
    return sorted(found)


def scan_file(rel: str, text: str) -> list[Region]:
    """The marked regions of one file, in order. Raises CourseError for a marker without its end, an
    end without a marker, a region inside a region, or an id whose chapter is not the file's."""
    regions: list[Region] = []
    lines = text.split("\n")
    open_region = None
    chapter_of_file = re.match(r"chapters/(\d\d)_", rel)
    for n, line in enumerate(lines):
        m = MARKER.match(line)
        if m:
            if open_region is not None:
                raise CourseError(f"{rel}:{n + 1}: exercise {m['id']} opens inside exercise {open_region.id} "
                                  f"(line {open_region.marker + 1}); close that one first with '// end graded'")
            if chapter_of_file is None or chapter_of_file.group(1) != m["id"][:2]:
                raise CourseError(f"{rel}:{n + 1}: exercise {m['id']} is marked outside chapter {m['id'][:2]}'s folder")
            open_region = Region(m["id"], rel, n, -1, m["indent"], m["task"])
        elif line.strip().startswith(("// graded", "// exercise")):  # a misspelt marker, or the old kind
            raise CourseError(f"{rel}:{n + 1}: a marker must read '// graded NNx: <task>'")
        elif END.match(line):
            if open_region is None:
                raise CourseError(f"{rel}:{n + 1}: '// end graded' without an exercise before it")
            open_region.end = n
            regions.append(open_region)
            open_region = None
    if open_region is not None:
        raise CourseError(f"{rel}:{open_region.marker + 1}: exercise {open_region.id} has no '// end graded'")
    return regions


def scan(root: Path) -> dict[str, list[Region]]:
    """Every marked region of a tree's chapters, by exercise id, in file order."""
    found: dict[str, list[Region]] = {}
    for rel in source_files(root):
        for region in scan_file(rel, (root / rel).read_text()):
            found.setdefault(region.id, []).append(region)
    return found


def check_catalog(exercises: list[Exercise], regions: dict[str, list[Region]]) -> None:
    """Raises CourseError unless every exercise has regions, as many as it has stubs, and every
    region has an exercise."""
    by_id = {e.id: e for e in exercises}
    for id_, rs in regions.items():
        if id_ not in by_id:
            raise CourseError(f"{rs[0].path}:{rs[0].marker + 1}: exercise {id_} is not in {CATALOG.name}")
    for e in exercises:
        rs = regions.get(e.id, [])
        if not rs:
            raise CourseError(f"{CATALOG.name}: exercise {e.id} has no marked region in chapters/")
        if len(rs) != len(e.stubs):
            raise CourseError(f"{CATALOG.name}: exercise {e.id} has {len(e.stubs)} stubs for {len(rs)} marked regions "
                              f"({', '.join(f'{r.path}:{r.marker + 1}' for r in rs)})")


def render_lines(text: str, regions: list[Region], exercises: dict[str, Exercise],
                 keep) -> tuple[list[str], list[int]]:
    """One file with the regions for which keep(exercise id, k) is false (k counts that exercise's
    regions in the file from 0) replaced by their stubs; marker lines stay. Returns the lines and, for
    each, the index of the line of `text` it comes from (a stub's lines: their marker's)."""
    lines = text.split("\n")
    index: dict[str, int] = {}
    out: list[str] = []
    origin: list[int] = []
    at = 0
    for region in regions:
        k = index.get(region.id, 0)
        index[region.id] = k + 1
        out.extend(lines[at:region.marker + 1])
        origin.extend(range(at, region.marker + 1))
        if keep(region.id, k):
            out.extend(lines[region.marker + 1:region.end])
            origin.extend(range(region.marker + 1, region.end))
        else:
            stub = [(region.indent + s) if s.strip() else "" for s in exercises[region.id].stubs[k]]
            out.extend(stub)
            origin.extend([region.marker] * len(stub))
        at = region.end
    out.extend(lines[at:])
    origin.extend(range(at, len(lines)))
    return out, origin


def render(text: str, regions: list[Region], exercises: dict[str, Exercise], answered: set[str],
           undone: frozenset[tuple[str, int]] = frozenset()) -> str:
    """One file with each region's lines replaced by its stub, except the regions of the exercises in
    `answered`, which keep their lines, unless (id, k) is in `undone` (the k-th region of exercise id,
    from 0). Marker lines stay."""
    lines, _ = render_lines(text, regions, exercises, lambda id_, k: id_ in answered and (id_, k) not in undone)
    return "\n".join(lines)


def stub_index(exercises: list[Exercise], root: Path) -> dict[str, list[Region]]:
    """Scans `root` and checks its regions against the catalog; returns the regions by file."""
    regions = scan(root)
    check_catalog(exercises, regions)
    by_file: dict[str, list[Region]] = {}
    for rs in regions.values():
        for r in rs:
            by_file.setdefault(r.path, []).append(r)
    for rs in by_file.values():
        rs.sort(key=lambda r: r.marker)
    return by_file


# ---------------------------------------------------------------------------------------------
# The student tree


def tracked_files(root: Path) -> list[str]:
    """The files of the repository at `root` as git tracks them (the working tree's contents are
    copied, so uncommitted edits go along; untracked and ignored files do not)."""
    try:
        out = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], check=True, capture_output=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise CourseError(f"{root} is not a git checkout (git ls-files failed): make the student tree from a "
                          "clone of the repository") from e
    return sorted(p for p in out.decode().split("\0") if p)


def write_tree(root: Path, dest: Path, exercises: list[Exercise], answered: set[str] = frozenset()) -> int:
    """Copies the repository at `root` to `dest` (which must not exist or be empty), every exercise
    not in `answered` as its stub. Returns the number of regions stubbed."""
    by_file = stub_index(exercises, root)
    if dest.exists() and any(dest.iterdir()):
        raise CourseError(f"{dest} is not empty: give a new folder")
    by_id = {e.id: e for e in exercises}
    stubbed = 0
    for rel in tracked_files(root):
        src = root / rel
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            os.symlink(os.readlink(src), target)
        elif rel in by_file:
            regions = by_file[rel]
            target.write_text(render(src.read_text(), regions, by_id, answered))
            shutil.copymode(src, target)
            stubbed += sum(1 for r in regions if r.id not in answered)
        elif src.exists():
            shutil.copy2(src, target)
    return stubbed


def apply_answers(solution: Path, tree: Path, exercises: list[Exercise], answered: set[str],
                  undone: frozenset[tuple[str, int]] = frozenset()) -> list[str]:
    """Rewrites, in a student tree, the exercise files whose text differs from `solution`'s with the
    exercises of `answered` answered (but for the regions of `undone`, render's) and the others stubbed.
    Returns the files rewritten (only those: a build then recompiles what they change and nothing else)."""
    by_file = stub_index(exercises, solution)
    by_id = {e.id: e for e in exercises}
    changed = []
    for rel, regions in sorted(by_file.items()):
        text = render((solution / rel).read_text(), regions, by_id, answered, undone)
        target = tree / rel
        if target.read_text() != text:
            target.write_text(text)
            changed.append(rel)
    return changed


# ---------------------------------------------------------------------------------------------
# The grade


# The grade builds a copy of the student's tree, not the tree itself: there an exercise whose lines do
# not compile is replaced by its stub, so that the other exercises still build and are graded. One
# compiler error costs the exercise it is in (and those whose tests run its lines), never a chapter
# that merely includes its file.

LOCATION = re.compile(r"^(?P<path>[^\s:][^:]*):(?P<line>\d+):(?:\d+:)? (?P<what>.*)$")


def student_files(root: Path, leave_out: Path | None = None) -> list[str]:
    """The files of a tree that its build reads, relative to its root: where the tree is a git
    checkout, those git tracks and those it does not ignore; else every file but .git/ and build/.
    Nothing under `leave_out` (the grade's own folder, wherever it is)."""
    files = tree_files(root)
    if leave_out is not None and root.resolve() in leave_out.resolve().parents:
        inside = leave_out.resolve().relative_to(root.resolve()).as_posix() + "/"
        files = [f for f in files if not f.startswith(inside)]
    return files


def tree_files(root: Path) -> list[str]:
    """student_files without leave_out."""
    try:
        top = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-toplevel"], check=True,
                             capture_output=True, text=True).stdout.strip()
        if Path(top).resolve() == root.resolve():
            out = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "-co", "--exclude-standard"], check=True,
                                 capture_output=True).stdout
            return sorted({p for p in out.decode().split("\0") if p and (root / p).is_file()})
    except (OSError, subprocess.CalledProcessError):
        pass
    found = []
    for dirpath, dirnames, names in os.walk(root):
        if Path(dirpath) == root:
            dirnames[:] = [d for d in dirnames if d not in (".git", "build")]
        found.extend((Path(dirpath) / n).relative_to(root).as_posix() for n in names)
    return sorted(found)


class GradeTree:
    """The grade's copy of a student's tree (`build_dir`/src) and its build (`build_dir`/build). Each
    file is written only where its text changes, so a build recompiles what the student changed."""

    def __init__(self, root: Path, build_dir: Path, exercises: list[Exercise]):
        self.root = root
        self.src = build_dir / "src"
        self.binary = build_dir / "build"
        self.by_id = {e.id: e for e in exercises}
        self.stubbed: dict[str, str] = {}  # exercise id -> the compiler error that had it stubbed
        self.texts: dict[str, str] = {}  # the student's text of each file with regions
        self.regions: dict[str, list[Region]] = {}
        self.origins: dict[str, list[int]] = {}  # per such file: the copy's line -> the student's line

    def sync(self) -> None:
        """Copies the student's files into the copy (where they differ), every exercise region as the
        student wrote it but those of self.stubbed, which hold their stubs; removes files the student
        no longer has."""
        files = student_files(self.root, self.src.parent)
        wanted = set(files)
        if self.src.exists():
            for dirpath, _, names in os.walk(self.src):
                for n in names:
                    rel = (Path(dirpath) / n).relative_to(self.src).as_posix()
                    if rel not in wanted:
                        (Path(dirpath) / n).unlink()
        regions = stub_index(list(self.by_id.values()), self.root)
        for rel in files:
            src, target = self.root / rel, self.src / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if src.is_symlink():
                if not target.is_symlink() or os.readlink(target) != os.readlink(src):
                    if target.exists() or target.is_symlink():
                        target.unlink()
                    os.symlink(os.readlink(src), target)
                continue
            if rel in regions:
                self.texts[rel] = src.read_text()
                self.regions[rel] = regions[rel]
                self._write(rel)
            elif not target.exists() or target.stat().st_size != src.stat().st_size \
                    or target.read_bytes() != src.read_bytes():
                shutil.copy2(src, target)

    def _write(self, rel: str) -> None:
        lines, origin = render_lines(self.texts[rel], self.regions[rel], self.by_id,
                                     lambda id_, k: id_ not in self.stubbed)
        self.origins[rel] = origin
        text = "\n".join(lines)
        target = self.src / rel
        if not target.exists() or target.read_text() != text:
            target.write_text(text)

    def configure(self, log) -> None:
        configure(self.src, self.binary, log)

    def where(self, path: str, line: int) -> tuple[str, int, str | None] | None:
        """A compiler's file and line in the copy as the student's file and line, and the exercise
        whose region holds it (None outside every region); None for a file outside the tree."""
        p = Path(path)
        p = (p if p.is_absolute() else self.binary / p).resolve()
        try:
            rel = p.relative_to(self.src.resolve()).as_posix()
        except ValueError:
            return None
        if rel not in self.origins:
            return rel, line, None
        origin = self.origins[rel]
        student = origin[line - 1] if 0 < line <= len(origin) else line - 1
        for r in self.regions[rel]:
            if r.marker < student < r.end:
                return rel, student + 1, r.id
        return rel, student + 1, None

    def attribute(self, output: str) -> tuple[str | None, str]:
        """The exercise a failed build's first error lies in, or None; and that error as "does not
        compile: file:line: error: ...", in the student's file and line. The error's own line decides
        where it is in a region; else the nearest line the compiler names on the way to it ("required
        from here", "in expansion of") that is."""
        located = []  # (is an error, where) of each line that names a file and line, in order
        for line in output.splitlines():
            m = LOCATION.match(line.strip())
            if m:
                found = self.where(m["path"], int(m["line"])) or (m["path"], int(m["line"]), None)
                located.append((m["what"].startswith(("error:", "fatal error:")), found, m["what"]))
        errors = [n for n, (is_error, _, _) in enumerate(located) if is_error]
        if not errors:
            return None, build_error(output)
        first = errors[0]
        _, (rel, line, _), what = located[first]
        message = f"does not compile: {rel}:{line}: {what}"
        following = range(first + 1, errors[1] if len(errors) > 1 else len(located))  # its notes
        context = ("required from", "in expansion of", "note:", "in definition of")
        for n in [first, *range(first - 1, -1, -1), *following]:
            if n != first and not located[n][2].lstrip().startswith(context):
                continue
            if located[n][1][2] is not None:
                return located[n][1][2], message
        return None, message

    def build(self, programs: list[str], jobs: int | None, progress=None) -> str | None:
        """Builds the programs. Where the student's lines of an exercise do not compile, that exercise's
        regions get their stubs (in the copy) and the build goes on; returns None when the programs
        built (with some exercises stubbed, perhaps), or the error when one outside every region (or in
        an exercise already stubbed) stops it."""
        while True:
            ok, output = run_build(self.binary, programs, jobs, progress)
            if ok:
                return None
            exercise, message = self.attribute(output)
            if exercise is None or exercise in self.stubbed:
                return message
            self.stubbed[exercise] = message
            for rel, regions in self.regions.items():
                if any(r.id == exercise for r in regions):
                    self._write(rel)



@dataclasses.dataclass
class Outcome:
    passed: bool
    message: str
    seconds: float  # of tests
    timed_out: bool = False
    build_seconds: float = 0.0  # of building what the tests need (0 when it was built already)


def configure(root: Path, build: Path, log) -> None:
    """Configures `build` from the default preset with the GPU path off (the grader runs every kernel on
    the CPU, through common/simt), unless it is configured already."""
    if (build / "CMakeCache.txt").exists():
        return
    command = ["cmake", "--preset", "default", "-B", str(build), "-DCMAKE_CUDA_COMPILER=NOTFOUND"]
    log(f"configuring {build} (the CPU path only) ...")
    result = subprocess.run(command, cwd=root, capture_output=True, text=True)
    if result.returncode != 0:
        sys.stderr.write(result.stdout + result.stderr)
        raise CourseError(f"the configure failed ({' '.join(command)}): see the lines above")


def known_targets(build: Path) -> set[str]:
    """The targets the build offers (Ninja's list), so that a program the build does not make (simt's
    race checker needs GCC) is left out with a note instead of failing the build."""
    result = subprocess.run(["cmake", "--build", str(build), "--target", "help"], capture_output=True, text=True)
    return {line.split(":")[0].strip() for line in result.stdout.splitlines() if ":" in line}


PROGRESS = re.compile(r"^\[(\d+)/(\d+)\] (.*)$")  # Ninja's "[12/40] Building CXX object ..."


def build_targets(build: Path, targets: list[str], jobs: int | None, progress=None) -> str | None:
    """Builds the targets; returns None, or the first compiler error (with its file and line). Each
    of the build tool's progress lines ("[12/40] Building ...") goes to progress(done, total, what) as
    it comes, where progress is given."""
    output = run_build(build, targets, jobs, progress)[1]
    if output is None:
        return None
    return build_error(output)


def run_build(build: Path, targets: list[str], jobs: int | None, progress=None) -> tuple[bool, str | None]:
    """Runs the build; returns (True, None) when it succeeds, else (False, its output)."""
    command = ["cmake", "--build", str(build), "--target", *targets]
    if jobs:
        command += ["--parallel", str(jobs)]
    lines = []
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          errors="replace") as process:
        for line in process.stdout:
            lines.append(line)
            m = PROGRESS.match(line)
            if m and progress:
                progress(int(m.group(1)), int(m.group(2)), m.group(3).strip())
    if process.returncode == 0:
        return True, None
    return False, "".join(lines)


def build_error(output: str) -> str:
    """The first compiler error of a build's output, as "does not compile: file:line: error: ...";
    or the build's last lines where no compiler error is there."""
    for line in output.splitlines():
        if "error:" in line or "error :" in line:
            return "does not compile: " + strip_root(line.strip())
    tail = [l for l in output.splitlines() if l.strip()][-3:]
    return "the build failed: " + " / ".join(tail)


def strip_root(text: str) -> str:
    return text.replace(str(ROOT) + "/", "").replace(str(Path.cwd()) + "/", "")


def first_failure(xml_text: str, program: str) -> str:
    """The first failed test case of a Catch2 XML report, as one line: the test case, its messages
    (INFO) and the failed check with its values; or, for a crash, the signal."""
    try:
        catch = ET.fromstring(xml_text)
    except ET.ParseError:
        # A crash cuts the report short: take what is there.
        m = re.search(r"<FatalErrorCondition[^>]*>\s*(.*?)\s*<", xml_text, re.S)
        name = re.findall(r'<TestCase name="([^"]*)"', xml_text)
        what = m.group(1).strip() if m else "the program stopped before its report was complete"
        return f'{program}: "{name[-1] if name else "?"}": {unescape(what)}'
    for case in catch.iter("TestCase"):
        result = case.find("OverallResult")
        if result is None or result.get("success") == "true":
            continue
        infos: list[str] = []
        for element in case.iter():
            if element.tag == "Info" and element.text:
                infos.append(element.text.strip())
            elif element.tag == "Expression" and element.get("success") == "false":
                original = (element.findtext("Original") or "").strip()
                expanded = (element.findtext("Expanded") or "").strip()
                infos.extend(i.text.strip() for i in element.findall("Info") if i.text)
                check = f"{element.get('type', 'CHECK')}({original})"
                if expanded and expanded != original:
                    check += f" with {expanded}"
                return one_line(f'{program}: "{case.get("name")}": ' + "; ".join(infos + [check]))
            elif element.tag in ("Exception", "FatalErrorCondition"):
                return one_line(f'{program}: "{case.get("name")}": {element.tag.lower()} '
                                f'{(element.text or "").strip()}' + (f" ({'; '.join(infos)})" if infos else ""))
        return one_line(f'{program}: "{case.get("name")}" failed')
    totals = catch.find("OverallResults")
    if totals is not None and totals.get("failures") == "0":
        return f"{program}: no test case failed, yet the program exited with an error"
    return f"{program}: failed"


def unescape(text: str) -> str:
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"').replace("&amp;", "&")


def one_line(text: str, limit: int = 600) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def run_program(build: Path, program: str, tag: str, timeout: float) -> Outcome:
    """Runs the test cases tagged `tag` of one test program, with a time limit."""
    path = build / "bin" / program
    start = time.monotonic()
    try:
        # --abort: the first failed check is all the grade shows, and a test case's later checks (on more
        # shapes) would only add time.
        result = subprocess.run([str(path), tag, "--reporter", "xml", "--warn", "NoTests", "--abort"], capture_output=True,
                                text=True, timeout=timeout, errors="replace")
    except subprocess.TimeoutExpired:
        return Outcome(False, f"{program}: timed out after {timeout:g} s (a loop that never ends? a barrier that "
                       "some threads never reach?)", time.monotonic() - start, True)
    seconds = time.monotonic() - start
    if result.returncode == 0:
        return Outcome(True, "", seconds)
    if "No tests ran" in result.stdout + result.stderr or result.returncode == 2 and "<TestCase" not in result.stdout:
        return Outcome(False, f"{program}: no test case is tagged {tag}", seconds)
    return Outcome(False, first_failure(result.stdout, program), seconds)


def grade_exercise(build: Path, exercise: Exercise, targets: set[str], timeout: float, jobs: int | None,
                   builder=None) -> Outcome:
    """Builds and runs the tests of one exercise: its programs' test cases tagged [gradedNNx], then, once
    those pass, the [racecheck] cases of its race-checker programs where the build has them. Passed
    when all of them pass, within `timeout` seconds of tests in all. builder(programs) builds them
    and returns None or the error (default: build_targets in `build`)."""
    if builder is None:
        builder = lambda programs: build_targets(build, programs, jobs)  # noqa: E731
    notes = []
    racecheck = [p for p in exercise.racecheck if p in targets]
    if len(racecheck) < len(exercise.racecheck):
        absent = ", ".join(p for p in exercise.racecheck if p not in targets)
        notes.append(f"the race check was not run: this build has no {absent}")
    missing = [p for p in exercise.programs if p not in targets]
    if missing:
        return Outcome(False, f"the build has no test program {', '.join(missing)}", 0.0)
    ran = 0.0
    built = 0.0
    # The exercise's own test cases, then the chapter's kernels under the race checker (its test cases
    # are tagged [racecheck]: they run every kernel of the chapter, so they come after the exercise's
    # own, whose message says more; and they are built only once those pass).
    for programs, tag in ((exercise.programs, exercise.tag), (racecheck, RACECHECK_TAG)):
        if not programs:
            continue
        start = time.monotonic()
        error = builder(programs)
        built += time.monotonic() - start
        if error:
            return Outcome(False, error, ran, build_seconds=built)
        for program in programs:
            outcome = run_program(build, program, tag, timeout - ran)
            ran += outcome.seconds
            if not outcome.passed:
                return Outcome(False, outcome.message, ran, outcome.timed_out, built)
            if ran >= timeout:
                return Outcome(False, f"timed out after {timeout:g} s", ran, True, built)
    return Outcome(True, "; ".join(notes), ran, build_seconds=built)


def select(exercises: list[Exercise], wanted: list[str]) -> list[Exercise]:
    """The exercises named (NNx, or NN for a whole chapter), in catalog order; all for none."""
    if not wanted:
        return exercises
    chosen = []
    for w in wanted:
        matched = [e for e in exercises if e.id == w or e.chapter == w]
        if not matched:
            raise CourseError(f"no exercise '{w}': give an id (e.g. 05a) or a chapter (e.g. 05); the ids are "
                              + ", ".join(e.id for e in exercises))
        chosen.extend(m for m in matched if m not in chosen)
    return sorted(chosen, key=lambda e: e.number)


def report_json(exercises: list[Exercise], outcomes: dict[str, Outcome]) -> dict:
    rows = [{"id": e.id, "chapter": e.chapter, "title": e.title, "points": e.points, "passed": outcomes[e.id].passed,
             "message": outcomes[e.id].message, "build_seconds": round(outcomes[e.id].build_seconds, 1),
             "test_seconds": round(outcomes[e.id].seconds, 1)} for e in exercises]
    return {"exercises": rows, "score": sum(e.points for e in exercises if outcomes[e.id].passed),
            "total": sum(e.points for e in exercises)}


def table(exercises: list[Exercise], outcomes: dict[str, Outcome], hints: bool = True) -> str:
    lines = [f"{'exercise':<9} {'points':>6}  {'result':<7} {'build':>6} {'tests':>6}  title / why"]
    for e in exercises:
        o = outcomes[e.id]
        got = e.points if o.passed else 0
        lines.append(f"{e.id:<9} {f'{got}/{e.points}':>6}  {'passed' if o.passed else 'FAILED':<7} "
                     f"{o.build_seconds:5.1f}s {o.seconds:5.1f}s  {e.title}")
        if not o.passed:
            lines.append(f"{'':41}{o.message}")
            # What its tests run besides its own lines: the earlier exercises of its chapter, and its needs.
            before = [o.id for o in exercises if o.chapter == e.chapter and o.number < e.number] + e.needs
            blocked = [n for n in before if n in outcomes and not outcomes[n].passed]
            if blocked:
                lines.append(f"{'':41}(its tests also run the lines of {', '.join(blocked)}, which fail: start there)")
            if hints:
                lines.append(f"{'':41}hint: {e.hint}")
        elif o.message:
            lines.append(f"{'':41}({o.message})")
    report = report_json(exercises, outcomes)
    lines.append(f"score: {report['score']} of {report['total']} points, {sum(o.passed for o in outcomes.values())} "
                 f"of {len(exercises)} exercises passed; build {sum(o.build_seconds for o in outcomes.values()):.0f} s, "
                 f"tests {sum(o.seconds for o in outcomes.values()):.0f} s")
    return "\n".join(lines)


def write_json(path: Path, report: dict) -> None:
    """Writes the report whole or not at all (a temporary file renamed over the target)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n")
    tmp.replace(path)
