"""Running Nsight Compute for the GPU check's table makers (ncu_table.py, ncu_profile_table.py).

run_ncu() profiles one program with `ncu --csv --clock-control none --metrics ...`: the GPU keeps
its own clocks (ncu would otherwise lock them to base, and the bytes and counts do not depend on
them), and counts print in base units where this ncu can (--print-units base). It tells apart what
is ours from what is the machine's:
  - ncu not installed, or its performance counters unavailable here (LibraryNotLoaded: ncu could not
    load its counter library, as in some virtual machines; ERR_NVGPUCTRPERM: the driver keeps the
    counters from users) -> NotMeasurable, which a table maker turns into exit status 77 ("skipped"
    in scripts/gpu_check.sh) with the reason;
  - anything else that goes wrong -> NcuFailed (exit status 1: a failure).
Source: Nsight Compute CLI documentation, "Command Line Options" (--csv, --metrics, --clock-control,
--print-units) and "Troubleshooting" (ERR_NVGPUCTRPERM).
"""
import os
import shutil
import subprocess

SKIP_STATUS = 77


class NotMeasurable(Exception):
    """This machine cannot give the counters (not a fault of the programs)."""


class NcuFailed(Exception):
    pass


def unavailable_reason(text):
    """Why ncu could not read counters on this machine, from its output; None where it could."""
    if "LibraryNotLoaded" in text:
        return "counters unavailable on this machine (ncu: LibraryNotLoaded, its counter library did not load)"
    if "ERR_NVGPUCTRPERM" in text:
        return ("counters unavailable on this machine (ERR_NVGPUCTRPERM: the driver keeps the performance "
                "counters from ncu)")
    return None


def ncu_command():
    ncu = shutil.which("ncu")
    if ncu is None:
        raise NotMeasurable("ncu (Nsight Compute) is not installed")
    units = []
    help_text = subprocess.run([ncu, "--help"], capture_output=True, text=True).stdout
    if "--print-units" in help_text:
        units = ["--print-units", "base"]
    return [ncu, "--csv", "--clock-control", "none"] + units


def run_ncu(metrics, program, csv_path, log_path):
    """Runs `program` (a list) under ncu with `metrics` (comma-separated); its CSV goes to csv_path,
    ncu's messages to log_path. Raises NotMeasurable or NcuFailed."""
    command = ncu_command() + ["--metrics", metrics] + list(program)
    with open(csv_path, "w") as out, open(log_path, "w") as err:
        status = subprocess.run(command, stdout=out, stderr=err).returncode
    with open(csv_path, errors="replace") as f, open(log_path, errors="replace") as g:
        text = f.read() + g.read()
    reason = unavailable_reason(text)
    if reason:
        raise NotMeasurable(reason)
    if status != 0:
        lines = [line for line in text.splitlines() if "ERROR" in line or "rror" in line]
        raise NcuFailed(f"ncu exited {status}: {(lines or ['see ' + os.path.basename(log_path)])[0][:200]}")
    if "No kernels were profiled" in text:
        raise NcuFailed(f"ncu profiled no kernel of {os.path.basename(program[0])}")
