#!/usr/bin/env python3
"""The libraries the GPU check builds against, carried to a GPU machine that has none of them.

The GPU machines scripts/gpu_check.sh is meant for start bare (CUDA Toolkit, CMake, ninja, python3,
no registry, no network). On a Debian 12 machine (or any with the same packages in its apt
sources), `scripts/gpu_deps.py download` puts the .deb files of fmt, CLI11, Catch2, Google
Benchmark, Google Highway and Boost.Context (with the Boost headers and the run-time packages their
CMake files check for), about 12 MB, into .deps/, a folder git ignores. Copy the checkout with it.
There, gpu_check.sh unpacks them into build/gpu-deps (dpkg-deb, or `ar` and `tar` where dpkg is
not installed), compiles and runs a small probe against them, and configures with their CMake
packages: fmt from its headers alone (FA_FMT_HEADER_ONLY) and Boost.Context from its static
library, so that the programs load no Debian shared library. The Google Benchmark and Highway
packages only let the configure finish: their shared libraries link only into the CPU benchmarks,
which the check does not build.

  scripts/gpu_deps.py download [--dir .deps]     apt-get download the packages (Debian/Ubuntu)
  scripts/gpu_deps.py unpack [--dir .deps] [--prefix build/gpu-deps]
                                                 unpack, probe, print the CMake arguments
Exit status: 0 done; 1 a package, a tool or the probe failed (one line on stderr says which).
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys
import tarfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# Debian 12's names. The -dev packages are those of the README's prerequisites line (libboost-context-dev
# is a name for libboost-context1.74-dev there); the others hold files the -dev packages' CMake files
# check for (the shared libraries) or include (the Boost headers).
PACKAGES = ["libfmt-dev", "libfmt9", "libcli11-dev", "catch2", "libbenchmark-dev", "libbenchmark1debian",
            "libhwy-dev", "libhwy1", "libboost-context1.74-dev", "libboost-context1.74.0", "libboost1.74-dev"]
# Each CMake package the configure looks for, by the file that defines it.
CONFIG_FILES = {"fmt": "fmt-config.cmake", "CLI11": "CLI11Config.cmake", "Catch2": "Catch2Config.cmake",
                "benchmark": "benchmarkConfig.cmake", "hwy": "hwy-config.cmake",
                "boost_context": "boost_context-config.cmake"}

PROBE = r"""
// Links the carried Boost.Context statically and compiles fmt from its headers, as the project does.
#include <cstdio>
#include <boost/context/detail/fcontext.hpp>
#include <fmt/format.h>
namespace context = boost::context::detail;
static void entry(context::transfer_t from) { context::jump_fcontext(from.fctx, nullptr); }
int main() {
  static char stack[64 * 1024];
  context::jump_fcontext(context::make_fcontext(stack + sizeof stack, sizeof stack, entry), nullptr);
  std::puts(fmt::format("{} {}", "probe", "ok").c_str());
}
"""


class DepsError(Exception):
    pass


def deb_files(folder):
    return sorted(glob.glob(os.path.join(folder, "*.deb")))


def download(folder):
    """apt-get download PACKAGES into `folder` (replacing what is there)."""
    if not shutil.which("apt-get"):
        raise DepsError("apt-get is not installed: run this on a Debian 12 machine (or one with its apt sources)")
    os.makedirs(folder, exist_ok=True)
    for old in deb_files(folder):
        os.remove(old)
    r = subprocess.run(["apt-get", "download"] + PACKAGES, cwd=folder, capture_output=True, text=True)
    if r.returncode != 0:
        raise DepsError("apt-get download failed: " + (r.stderr.strip().splitlines() or ["no message"])[-1])
    return deb_files(folder)


def extract_deb(deb, prefix):
    """Unpacks one .deb's files (its data.tar.*) under `prefix`."""
    if shutil.which("dpkg-deb"):
        r = subprocess.run(["dpkg-deb", "-x", deb, prefix], capture_output=True, text=True)
        if r.returncode != 0:
            raise DepsError(f"dpkg-deb -x {os.path.basename(deb)}: {r.stderr.strip()[:200]}")
        return
    # A .deb is an ar archive: debian-binary, control.tar.*, data.tar.*. Read it here rather than
    # ask for `ar`: the format is a 8-byte magic, then 60-byte headers, each before its member.
    with open(deb, "rb") as f:
        if f.read(8) != b"!<arch>\n":
            raise DepsError(f"{os.path.basename(deb)} is not a .deb (no ar header)")
        while True:
            header = f.read(60)
            if len(header) < 60:
                raise DepsError(f"{os.path.basename(deb)} has no data.tar member")
            name = header[:16].decode().strip().rstrip("/")
            size = int(header[48:58].decode().strip())
            if name.startswith("data.tar"):
                member = os.path.join(prefix, ".member-" + name)
                with open(member, "wb") as out:
                    out.write(f.read(size))
                try:
                    with tarfile.open(member) as tar:  # .xz, .gz or plain; Python reads each
                        # Our own download: links and modes as packed (Python 3.12+ asks).
                        trusted = {"filter": "fully_trusted"} if hasattr(tarfile, "fully_trusted_filter") else {}
                        tar.extractall(prefix, **trusted)
                except (tarfile.TarError, EOFError) as e:
                    raise DepsError(f"{os.path.basename(deb)}: cannot unpack {name} here ({e})")
                finally:
                    os.remove(member)
                return
            f.seek(size + size % 2, os.SEEK_CUR)


def unpack(debs, prefix):
    """Unpacks every .deb under `prefix` once (a stamp file names what was unpacked)."""
    stamp = os.path.join(prefix, "unpacked.txt")
    names = "\n".join(os.path.basename(d) for d in debs) + "\n"
    if os.path.exists(stamp) and open(stamp).read() == names:
        return
    shutil.rmtree(prefix, ignore_errors=True)
    os.makedirs(prefix)
    for deb in debs:
        extract_deb(deb, prefix)
    with open(stamp, "w") as f:
        f.write(names)


def find(prefix, name):
    for folder, _, names in os.walk(prefix):
        if name in names:
            return folder
    return None


def cmake_args(prefix):
    """The configure's arguments for the unpacked packages: each package's folder given outright
    (a non-Debian system's CMake would not look in lib/x86_64-linux-gnu), fmt header-only, Boost.Context
    static."""
    args = []
    for package, file in CONFIG_FILES.items():
        folder = find(prefix, file)
        if folder is None:
            raise DepsError(f"the carried packages have no {file} (CMake package {package}): run "
                            "scripts/gpu_deps.py download again")
        args.append(f"-D{package}_DIR={folder}")
    return args + ["-DFA_FMT_HEADER_ONLY=ON", "-DBoost_USE_STATIC_LIBS=ON"]


def probe(prefix, work):
    """Compiles, links and runs PROBE against the unpacked packages with this machine's compiler
    and C library. Returns None, or one line saying why they cannot be used here."""
    include = os.path.join(prefix, "usr", "include")  # Debian's layout
    library = find(prefix, "libboost_context.a")
    if library is None:
        return "no libboost_context.a among the carried packages"
    compiler = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if not compiler:
        return "no C++ compiler (c++ or g++) on the PATH"
    os.makedirs(work, exist_ok=True)
    source, program = os.path.join(work, "probe.cpp"), os.path.join(work, "probe")
    with open(source, "w") as f:
        f.write(PROBE)
    r = subprocess.run([compiler, "-std=c++17", "-DFMT_HEADER_ONLY=1", "-isystem", include, source,
                        os.path.join(library, "libboost_context.a"), "-pthread", "-o", program],
                       capture_output=True, text=True)
    if r.returncode != 0:
        lines = [line for line in r.stderr.splitlines() if "error" in line.lower() or "undefined" in line]
        return f"the probe does not build with {os.path.basename(compiler)}: " + (lines or ["no message"])[0][:200]
    r = subprocess.run([program], capture_output=True, text=True)
    if r.returncode != 0 or "probe ok" not in r.stdout:
        return f"the probe does not run (exit {r.returncode}): {r.stderr.strip()[:200]}"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("action", choices=["download", "unpack"])
    ap.add_argument("--dir", default=os.path.join(ROOT, ".deps"), help="the .deb folder (default: .deps)")
    ap.add_argument("--prefix", default=os.path.join(ROOT, "build", "gpu-deps"),
                    help="where unpack puts them (default: build/gpu-deps)")
    args = ap.parse_args()
    try:
        if args.action == "download":
            debs = download(args.dir)
            size = sum(os.path.getsize(d) for d in debs) / 1e6
            print(f"gpu_deps: {len(debs)} packages, {size:.1f} MB, in {args.dir}")
            return 0
        debs = deb_files(args.dir)
        if not debs:
            raise DepsError(f"no .deb files in {args.dir}: run scripts/gpu_deps.py download on a Debian 12 machine")
        unpack(debs, args.prefix)
        problem = probe(args.prefix, os.path.join(args.prefix, "probe"))
        if problem:
            raise DepsError(f"the carried libraries cannot be used on this machine: {problem}")
        print(" ".join(cmake_args(args.prefix)))
        return 0
    except (DepsError, OSError) as e:
        print(f"gpu_deps: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
