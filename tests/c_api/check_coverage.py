#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# gk.h covers the C++ builders: every public op builder (and node modifier) in
# include/gk/ops/*.hpp has a gk_<name> declaration in gk.h with the same number of
# parameters, and an entry in src/c_api_entries.inc (which makes libgk.so export it).
# Left out on purpose: *_impl helpers and the std::function overloads (C++ only).
#   check_coverage.py SOURCE_ROOT
import re, sys

root = sys.argv[1]
public = {}
for f in ["view", "elementwise", "reduce", "norm", "softmax", "rope", "copy", "attn", "matmul", "extra"]:
    s = open(f"{root}/include/gk/ops/{f}.hpp").read()
    while True:  # drop namespace detail... { } blocks
        m = re.search(r"^namespace detail[\w:]* \{", s, re.M)
        if not m:
            break
        j, depth = m.end(), 1
        while depth:
            depth += {"{": 1, "}": -1}.get(s[j], 0)
            j += 1
        s = s[: m.start()] + s[j:]
    for m in re.finditer(r"^inline (?:tensor\*|void|gk::prec) (\w+)\((.*?)\)\s*(?:noexcept\s*)?\{", s, re.S | re.M):
        name, params = m.group(1), m.group(2)
        if name.endswith("_impl") or "function&" in params:
            continue
        public.setdefault(name, len([p for p in params.split(",") if p.strip()]))
    for m in re.finditer(r"^GK_UNARY_BUILDER\((\w+)\)", s, re.M):
        public[m.group(1)] = public[m.group(1) + "_inplace"] = 2
    for m in re.finditer(r"^GK_GLU_BUILDER\((\w+)\)", s, re.M):
        public[m.group(1)] = public[m.group(1) + "_swapped"] = 2
        public[m.group(1) + "_split"] = 3

header = open(f"{root}/include/gk/gk.h").read()
declared = {m.group(1): m.group(2) for m in re.finditer(r"GK_API [^;(]*?\bgk_(\w+)\(([^)]*)\);", header)}
entries = set(re.findall(r"^GK_(?:FN|OP)\((?:[^,]+, )?(\w+),", open(f"{root}/src/c_api_entries.inc").read(), re.M))

# the C form returns what the C++ one returns through an out-parameter
c_extra_params = {"flash_attn_ext_get_prec": 1}


def problems(declared):
    bad = []
    for name, n in sorted(public.items()):
        if name not in declared:
            bad.append(f"gk.h has no gk_{name}")
            continue
        if name not in entries:
            bad.append(f"src/c_api_entries.inc has no entry for {name}")
        got = len([p for p in declared[name].split(",") if p.strip() and p.strip() != "void"])
        if got != n + c_extra_params.get(name, 0):
            bad.append(f"gk_{name} takes {got} parameters, the C++ builder {n}")
    return bad


# planted controls: a missing declaration and a wrong parameter count must be caught
planted = dict(declared)
del planted["mul_mat"]
planted["rms_norm"] = "gk_context *ctx, gk_tensor *a"
if len(problems(planted)) != len(problems(declared)) + 2:
    sys.exit("the planted controls were not caught: this checker is broken")
bad = problems(declared)
for b in bad:
    print(b)
print(f"{len(public)} public builders and node modifiers, {len(declared)} functions in gk.h: {len(bad)} problems")
sys.exit(1 if bad else 0)
