#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Works out the CUDA architectures gk's device code is compiled for, when
# -Dcuda-architectures is empty (a list given there is only sorted). Prints one line: a semicolon list of compute
# capabilities ("80;86;89;90;120"); the newest also gets PTX (meson adds it).
#
#   1. the real architectures this nvcc can emit (nvcc --list-gpu-code), sm_75 and up;
#   2. intersected with the devices the driver reports (nvidia-smi), when there is one;
#   3. otherwise a default list: the chips gk serves (Ampere, Ada, Hopper, Blackwell
#      consumer), those of them this nvcc knows.
# A device newer than anything nvcc knows gets the newest nvcc target: its PTX is JIT
# compiled by the driver, so the device still runs (the registry names what was built).
import re
import subprocess
import sys

DEFAULT = [80, 86, 89, 90, 120]


def run(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def main():
    nvcc = sys.argv[1] if len(sys.argv) > 1 else "nvcc"
    if len(sys.argv) > 2 and sys.argv[2].strip():
        # a list the user gave: normalised (ascending, no duplicates), since the build
        # compiles one PTX at the lowest and assembles it for each
        given = sorted({int(a) for a in re.split(r"[;,\s]+", sys.argv[2]) if a.strip()})
        print(";".join(str(a) for a in given))
        return
    known = sorted({int(m) for m in re.findall(r"sm_(\d+)", run([nvcc, "--list-gpu-code"]))})
    known = [a for a in known if a >= 75]
    if not known:
        known = DEFAULT
    found = set()
    for line in run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"]).splitlines():
        m = re.match(r"\s*(\d+)\.(\d+)", line)
        if m:
            found.add(int(m.group(1)) * 10 + int(m.group(2)))
    if found:
        archs = sorted({a if a in known else max(k for k in known if k <= a) if any(k <= a for k in known)
                        else known[0] for a in found})
    else:
        archs = [a for a in DEFAULT if a in known] or known[-1:]
    print(";".join(str(a) for a in archs))


if __name__ == "__main__":
    main()
