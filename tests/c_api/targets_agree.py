#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Runs c_fingerprint once per SIMD target (GK_TARGET=...) and requires every integer-path
# line (encoders, decoders, quantized dots, quantized matmul) to be the same on every
# target this CPU runs; float-path lines that differ are listed, not failed. Needs two
# runnable targets to compare anything (one is a skip, exit 77).
#   targets_agree.py FINGERPRINT_EXE [--bench]
import os, subprocess, sys

exe, extra = sys.argv[1], sys.argv[2:]
runs = {}
for target in ["scalar", "avx2", "avx512"]:
    env = dict(os.environ, GK_TARGET=target)
    p = subprocess.run([exe] + extra, env=env, capture_output=True, text=True)
    if p.returncode == 77:
        print(f"{target}: not runnable on this CPU, left out")
        continue
    if p.returncode != 0:
        sys.exit(f"{target}: c_fingerprint failed ({p.returncode}):\n{p.stderr}")
    lines = p.stdout.splitlines()
    runs[target] = {l.rsplit(" ", 1)[0]: l.rsplit(" ", 1)[1] for l in lines if l.startswith(("int ", "float "))}
    for l in lines:
        if l.startswith("bench "):
            print(f"{target}: {l[6:]}")
    print(f"{target}: {len(runs[target])} results")
if len(runs) < 2:
    print("fewer than two runnable targets: nothing to compare")
    sys.exit(77)


def compare(runs):
    base_name, base = next(iter(runs.items()))
    bad, float_diffs = [], []
    for name, r in runs.items():
        if r.keys() != base.keys():
            bad.append(f"{name} and {base_name} print different result lists")
            continue
        for k, v in r.items():
            if v != base[k]:
                (bad if k.startswith("int ") else float_diffs).append(f"{k}: {base_name} {base[k]}, {name} {v}")
    return bad, float_diffs


# planted control: one integer result changed on the last target must be caught
planted = {n: dict(r) for n, r in runs.items()}
last = planted[list(planted)[-1]]
key = next(k for k in last if k.startswith("int "))
last[key] = "0" * len(last[key])
if len(compare(planted)[0]) != 1:
    sys.exit("the planted difference was not caught: this comparison is broken")

bad, float_diffs = compare(runs)
base = next(iter(runs.values()))
for d in float_diffs:
    print("float path differs (allowed):", d)
for b in bad:
    print("INTEGER PATH DIFFERS:", b)
n_int = sum(k.startswith("int ") for k in base)
print(f"{n_int} integer-path results compared over {', '.join(runs)}: {len(bad)} differ")
sys.exit(1 if bad else 0)
