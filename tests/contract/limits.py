# SPDX-License-Identifier: MIT
"""Gate 5 of the kernel contract: every registered CUDA launch against every chip gk serves,
read from the compiled images, no GPU needed.

  limits.py compile --nvcc NVCC --src F.cu --out DIR --archs 80,86,... [--depfile D] -- FLAGS
      one cubin per architecture (DIR/<stem>.sm_XX.cubin)
  limits.py check --cubins A.cubin ... --launches L.txt ... --records DIR --known K.txt
                  [--only TEXT] [--write-records]
  limits.py crosscheck --nvcc NVCC --src F.cu --arch 90 -- FLAGS
      compiles with -Xptxas -v and compares ptxas's figures with what this parser reads

What is read from each cubin (an ELF; no cuobjdump needed): each kernel is an STT_FUNC symbol
with a .text.<name> section; its registers are the EIATTR_REGCOUNT record in .nv.info, its
launch bounds EIATTR_MAX_THREADS (maxntid) / EIATTR_REQNTID in .nv.info.<name>, its static
shared bytes the size of .nv.shared.<name> (on sm_90 and later that section also holds the
1 KiB the driver reserves per block, marked by a .nv.shared.reserved.* section; it is
subtracted, so the figure equals ptxas -v's "bytes smem"), and the compiler release the
.note.nv.tkinfo note ("Cuda compilation tools, release 13.0, ...").

A launch record (src/cuda/launches/<family>.txt, tests/contract/cuda_controls.launches.txt)
is `<substring of the kernel name> <threads per block> <max dynamic shared bytes> <comment>`;
a kernel takes the longest record substring found in its mangled or demangled name. A kernel
with no record is a finding (it cannot be checked). The records per nvcc release
(records/nvcc-<release>.txt) hold what each image compiled to; they are compared every run and
differences print as STALE (re-derive with --write-records; never loosen a limit to match).
"""
import argparse
import os
import re
import struct
import subprocess
import sys

KiB = 1024
# per-block limits of each chip served: registers per thread and per block, threads per
# block, shared bytes a block may opt in to (cudaDevAttrMaxSharedMemoryPerBlockOptin, the
# driver's 1 KiB reserve excluded), and what it gets without opting in
CHIPS = {
    'sm_80': dict(regs_thread=255, regs_block=65536, threads=1024, smem_optin=163 * KiB, smem_default=48 * KiB),
    'sm_86': dict(regs_thread=255, regs_block=65536, threads=1024, smem_optin=99 * KiB, smem_default=48 * KiB),
    'sm_89': dict(regs_thread=255, regs_block=65536, threads=1024, smem_optin=99 * KiB, smem_default=48 * KiB),
    'sm_90': dict(regs_thread=255, regs_block=65536, threads=1024, smem_optin=227 * KiB, smem_default=48 * KiB),
    'sm_120': dict(regs_thread=255, regs_block=65536, threads=1024, smem_optin=99 * KiB, smem_default=48 * KiB),
}
REG_ALLOC_UNIT = 256  # registers are handed to a warp in units of 256 (8 per thread) on all of them
CONTROL_MARK = 'contract_control_gate5'  # kernels planted to break this gate

EIATTR_MAX_THREADS, EIATTR_REQNTID, EIATTR_REGCOUNT = 0x05, 0x10, 0x2f


# ---- reading a cubin ----

def read_cubin(path, d=None):
    if d is None:
        d = open(path, 'rb').read()
    if d[:4] != b'\x7fELF' or d[4] != 2:
        raise SystemExit(f'{path}: not a 64-bit ELF cubin')
    shoff, = struct.unpack_from('<Q', d, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from('<HHH', d, 0x3a)
    secs = []
    for i in range(shnum):
        name, typ, _flags, _addr, off, size, link, info, _align, _ent = struct.unpack_from('<IIQQQQIIQQ', d, shoff + i * shentsize)
        secs.append(dict(name_off=name, type=typ, off=off, size=size, link=link, info=info))

    def cstr(base, off):
        end = d.index(b'\0', base + off)
        return d[base + off:end].decode()

    for s in secs:
        s['name'] = cstr(secs[shstrndx]['off'], s['name_off'])
    by_name = {s['name']: s for s in secs}
    symtab = next(s for s in secs if s['type'] == 2)
    strtab = secs[symtab['link']]
    syms = []
    for k in range(symtab['size'] // 24):
        st_name, st_info, _other, shndx, _value, _size = struct.unpack_from('<IBBHQQ', d, symtab['off'] + 24 * k)
        syms.append(dict(name=cstr(strtab['off'], st_name), type=st_info & 0xf, shndx=shndx))

    def records(sec):
        p, end, out = sec['off'], sec['off'] + sec['size'], []
        while p < end:
            fmt, attr = d[p], d[p + 1]
            if fmt == 4:  # EIFMT_SVAL: a sized payload
                n, = struct.unpack_from('<H', d, p + 2)
                out.append((attr, [struct.unpack_from('<I', d, p + 4 + k)[0] for k in range(0, n - 3, 4)]))
                p += 4 + n
            else:         # EIFMT_NVAL / BVAL / HVAL: a 16-bit value in place
                v, = struct.unpack_from('<H', d, p + 2)
                out.append((attr, [v]))
                p += 4
        return out

    regs = {}
    if '.nv.info' in by_name:
        for attr, v in records(by_name['.nv.info']):
            if attr == EIATTR_REGCOUNT:
                regs[v[0]] = v[1]
    reserved = any(n.startswith('.nv.shared.reserved') for n in by_name)
    release = None
    note = by_name.get('.note.nv.tkinfo')
    if note:
        m = re.search(rb'release (\d+\.\d+)', d[note['off']:note['off'] + note['size']])
        release = m.group(1).decode() if m else None
    kernels = {}
    for idx, s in enumerate(syms):
        if s['type'] != 2 or ('.text.' + s['name']) not in by_name:  # STT_FUNC with its own text: a kernel
            continue
        name = s['name']
        k = dict(name=name, regs=regs.get(idx), maxntid=None, reqntid=None, smem=0)
        info = by_name.get('.nv.info.' + name)
        if info:
            for attr, v in records(info):
                if attr == EIATTR_MAX_THREADS:
                    k['maxntid'] = v[0] * v[1] * v[2]
                elif attr == EIATTR_REQNTID:
                    k['reqntid'] = v[0] * v[1] * v[2]
        sh = by_name.get('.nv.shared.' + name)
        if sh:
            k['smem'] = max(0, sh['size'] - (KiB if reserved else 0))
        if k['regs'] is None:
            raise SystemExit(f'{path}: kernel {name} has no EIATTR_REGCOUNT record (a format this parser does not know)')
        kernels[name] = k
    return release, kernels


def elf_sections(d):
    shoff, = struct.unpack_from('<Q', d, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from('<HHH', d, 0x3a)
    secs = [struct.unpack_from('<IIQQQQIIQQ', d, shoff + i * shentsize) for i in range(shnum)]
    base = secs[shstrndx][4]
    return {d[base + s[0]:d.index(b'\0', base + s[0])].decode(): (s[4], s[5]) for s in secs}


def object_images(path):
    """The cubins inside a host object's or static library's fatbins: [(label, arch, bytes)].
    The library is compiled with -no-compress, so each image is a plain ELF in .nv_fatbin;
    its chip is the SM number in e_flags bits 8-15."""
    d = open(path, 'rb').read()
    members = []
    if d[:8] == b'!<arch>\n':  # an ar archive: 60-byte member headers
        p = 8
        while p + 60 <= len(d):
            name = d[p:p + 16].decode(errors='replace').strip()
            size = int(d[p + 48:p + 58].decode().strip())
            body = d[p + 60:p + 60 + size]
            if body[:4] == b'\x7fELF':
                members.append((f'{path}({name.rstrip("/")})', body))
            p += 60 + size + (size & 1)
    elif d[:8] == b'!<thin>\n':  # a thin archive (meson's default): members are files beside it
        p, longnames = 8, b''
        while p + 60 <= len(d):
            name = d[p:p + 16].decode(errors='replace').strip()
            size = int(d[p + 48:p + 58].decode().strip())
            if name == '//':
                longnames = d[p + 60:p + 60 + size]
            stored = name in ('/', '//', '/SYM64/')
            if not stored:
                if name.startswith('/') and name[1:].isdigit():
                    off = int(name[1:])
                    name = longnames[off:longnames.index(b'\n', off)].decode()
                name = name.rstrip('/')
                f = os.path.join(os.path.dirname(os.path.abspath(path)), name)
                body = open(f, 'rb').read()
                if body[:4] == b'\x7fELF':
                    members.append((f, body))
            p += 60 + (size + (size & 1) if stored else 0)
    elif d[:4] == b'\x7fELF':
        members.append((path, d))
    out = []
    for label, obj in members:
        secs = elf_sections(obj)
        if '.nv_fatbin' not in secs:
            continue
        off, size = secs['.nv_fatbin']
        blob = obj[off:off + size]
        i = blob.find(b'\x7fELF')
        while i >= 0:
            img = blob[i:]
            flags, = struct.unpack_from('<I', img, 0x30)
            if img[4] == 2:  # 64-bit: a cubin (offsets inside are relative to its start)
                out.append((label, 'sm_%d' % ((flags >> 8) & 0xff), img))
            i = blob.find(b'\x7fELF', i + 4)
    if not out:
        raise SystemExit(f'{path}: no uncompressed cubin images (compile with -no-compress)')
    return out


def arch_of(path):
    m = re.search(r'\.(sm_\d+)\.cubin$', path)
    if not m:
        raise SystemExit(f'{path}: cubin names end in .sm_XX.cubin')
    return m.group(1)


def demangle(names):
    if not names:
        return {}
    try:
        out = subprocess.run(['c++filt'], input='\n'.join(names), capture_output=True, text=True, check=True).stdout
        return dict(zip(names, out.splitlines()))
    except (OSError, subprocess.CalledProcessError):
        return {n: n for n in names}


# ---- launch records, records per release, known findings ----

def read_launches(paths):
    recs = []
    for p in paths:
        if not os.path.exists(p):
            continue
        for ln, line in enumerate(open(p), 1):
            line = line.split('#', 1)[0].strip()
            if not line:
                continue
            f = line.split(None, 3)
            try:
                recs.append(dict(sub=f[0], threads=int(f[1]), dyn=int(f[2]), where=f'{os.path.basename(p)}:{ln}'))
            except (IndexError, ValueError):
                raise SystemExit(f'{p}:{ln}: want "<kernel substring> <threads> <dynamic shared bytes> <comment>", got: {line}')
    return recs


def rel_key(r):
    return tuple(int(x) for x in r.split('.'))


# nvcc names an anonymous namespace after a hash of where it compiled the file
# (_GLOBAL__N__<8 hex>_<file>_...), so one source gives other names in another checkout:
# records key kernels by the name with that hash masked.
def stable_name(n):
    return re.sub(r'_GLOBAL__N__[0-9a-f]{8}_', '_GLOBAL__N__xxxxxxxx_', n)


def record_line(arch, k):
    return f"{arch} {stable_name(k['name'])} regs={k['regs']} smem={k['smem']} maxntid={k['maxntid'] or 0} reqntid={k['reqntid'] or 0}"


def load_record_sets(rdir):
    sets = {}
    if os.path.isdir(rdir):
        for f in os.listdir(rdir):
            m = re.fullmatch(r'nvcc-(\d+\.\d+)\.txt', f)
            if m:
                lines = {}
                for line in open(os.path.join(rdir, f)):
                    line = line.strip()
                    if line and not line.startswith('#'):
                        a, n, rest = line.split(' ', 2)
                        lines[(a, stable_name(n))] = f'{a} {stable_name(n)} {rest}'
                sets[m.group(1)] = lines
    return sets


def read_known(path):
    """known.txt's gate-5 lines: `cuda 5 <kernel name substring> <kind> : <what>`."""
    out = []
    if path and os.path.exists(path):
        for ln, line in enumerate(open(path), 1):
            line = line.split('#', 1)[0].strip()
            f = line.split(None, 4)
            if len(f) < 4 or f[0] != 'cuda' or f[1] != '5':
                continue
            what = line.split(' : ', 1)[1].strip() if ' : ' in line else ''
            out.append(dict(sub=f[2], kind=f[3], what=what, where=f'{os.path.basename(path)}:{ln}', seen=False))
    return out


# ---- the check ----

def check_launch(chip, k, rec):
    """The limit problems of one kernel at one launch record on one chip: (kind, text) pairs."""
    c = CHIPS[chip]
    out = []
    t = rec['threads']
    if k['regs'] > c['regs_thread']:
        out.append(('registers', f"{k['regs']} registers per thread > {c['regs_thread']}"))
    warps = (t + 31) // 32
    per_warp = (k['regs'] * 32 + REG_ALLOC_UNIT - 1) // REG_ALLOC_UNIT * REG_ALLOC_UNIT
    if warps * per_warp > c['regs_block']:
        out.append(('registers', f"{k['regs']} registers x {t} threads = {warps * per_warp} per block (per-warp rounding) > {c['regs_block']}"))
    if t < 1 or t > c['threads']:
        out.append(('threads', f"{t} threads per block, the chip allows 1..{c['threads']}"))
    if k['maxntid'] and t > k['maxntid']:
        out.append(('bounds', f"{t} threads per block > __launch_bounds__ {k['maxntid']}"))
    if k['reqntid'] and t != k['reqntid']:
        out.append(('bounds', f"{t} threads per block != required {k['reqntid']}"))
    if k['smem'] + rec['dyn'] > c['smem_optin']:
        out.append(('shared', f"{k['smem']} static + {rec['dyn']} dynamic shared bytes > {c['smem_optin']} a block may have"))
    return out


def cmd_check(a):
    images = {}   # arch -> {name: kernel}
    releases = set()
    for p in a.cubins or []:
        rel, ks = read_cubin(p)
        if rel:
            releases.add(rel)
        images.setdefault(arch_of(p), {}).update(ks)
    for p in a.objects or []:
        for label, arch, img in object_images(p):
            rel, ks = read_cubin(label, img)
            if rel:
                releases.add(rel)
            images.setdefault(arch, {}).update(ks)
    if not releases:
        out = subprocess.run([a.nvcc or 'nvcc', '--version'], capture_output=True, text=True).stdout
        m = re.search(r'release (\d+\.\d+)', out)
        releases.add(m.group(1) if m else '0.0')
    if len(releases) != 1:
        raise SystemExit(f'images from several nvcc releases: {sorted(releases)}')
    release = releases.pop()
    missing = [c for c in CHIPS if c not in images]
    if missing:
        raise SystemExit(f'no images for {missing}: gate 5 checks every chip served')

    names = sorted({n for ks in images.values() for n in ks})
    dem = demangle(names)
    launches = read_launches(a.launches)
    known = read_known(a.known)

    def record_for(n):
        hits = [r for r in launches if r['sub'] in n or r['sub'] in dem[n]]
        return max(hits, key=lambda r: len(r['sub'])) if hits else None

    def is_control(n):
        return CONTROL_MARK in n

    def known_for(n, kind):
        for e in known:
            if (e['sub'] in n or e['sub'] in dem[n]) and e['kind'] == kind:
                e['seen'] = True
                return e
        return None

    problems = n_known = checked = 0
    controls = {}  # control kernel -> red
    for n in names:
        if a.only and a.only not in n and a.only not in dem[n]:
            continue
        rec = record_for(n)
        short = dem[n]
        if rec is None:
            if is_control(n):
                controls[n] = False
                continue
            e = known_for(n, 'no-record')
            tag = 'KNOWN' if e else 'FAIL'
            print(f'{tag} gate5 {short}: no launch record (add "<name> <threads> <dynamic shared>" to src/cuda/launches/<family>.txt)')
            if e:
                n_known += 1
            else:
                problems += 1
            continue
        kernel_bad = False
        for chip in CHIPS:
            k = images[chip].get(n)
            if k is None:  # compiled out for this chip (an arch guard), or images of different sources
                print(f'note gate5 {short}: not in the {chip} image, nothing to check there')
                continue
            checked += 1
            for kind, text in check_launch(chip, k, rec):
                kernel_bad = True
                if is_control(n):
                    print(f'RED  gate5 control {short} on {chip}: {text} ({rec["where"]})')
                    continue
                e = known_for(n, kind)
                tag = 'KNOWN' if e else 'FAIL'
                print(f'{tag} gate5 {short} on {chip}: {text} ({rec["where"]})')
                if e:
                    n_known += 1
                else:
                    problems += 1
        if is_control(n):
            controls[n] = kernel_bad
        elif not kernel_bad and a.verbose:
            print(f'ok   gate5 {short}: {rec["threads"]} threads, {rec["dyn"]} dynamic shared ({rec["where"]})')
    for n, red in controls.items():
        if not red:
            print(f'FAIL gate5 control {dem[n]} stayed green: gate 5 would not catch what it was planted for')
    if not a.only:
        for e in known:
            if not e['seen']:
                print(f'FAIL gate5 known entry {e["sub"]} {e["kind"]} ({e["where"]}) no longer fails: remove it')
                problems += 1
        used = {r['sub'] for r in launches for n in names if r['sub'] in n or r['sub'] in dem[n]}
        for r in launches:
            if r['sub'] not in used:
                print(f'note gate5 launch record "{r["sub"]}" ({r["where"]}) matches no compiled kernel')

    # records per compiler release
    sets = load_record_sets(a.records)
    at_or_below = sorted((s for s in sets if rel_key(s) <= rel_key(release)), key=rel_key)
    current = {}
    for s in at_or_below:
        current.update(sets[s])
    compiled = {(chip, stable_name(n)): record_line(chip, images[chip][n]) for chip in images for n in images[chip]}
    if a.write_records:
        below = {}
        for s in at_or_below:
            if s != release:
                below.update(sets[s])
        lines = sorted(v for kk, v in compiled.items() if below.get(kk) != v)
        os.makedirs(a.records, exist_ok=True)
        path = os.path.join(a.records, f'nvcc-{release}.txt')
        with open(path, 'w') as f:
            f.write(f'# gate 5 launch records as nvcc {release} compiles them ({"base set" if not below else "differences from the sets below"}); '
                    'written by limits.py check --write-records\n')
            f.write('\n'.join(lines) + '\n')
        print(f'wrote {len(lines)} records to {path}')
        current = dict(below)
        current.update({kk: v for kk, v in compiled.items()})
        at_or_below = sorted(set(at_or_below) | {release}, key=rel_key)
    used_set = at_or_below[-1] if at_or_below else None
    stale = 0
    shown = 40  # the first few differences in full; the count says the rest

    def say(text):
        if stale <= shown:
            print(text)

    for kk, v in sorted(compiled.items()):
        if a.only and a.only not in kk[1] and a.only not in dem.get(kk[1], kk[1]):
            continue
        if current.get(kk) != v:
            stale += 1
            was = current.get(kk)
            say(f'STALE gate5 record {kk[0]} {dem.get(kk[1], kk[1])}: compiles to "{v.split(" ", 2)[2]}", '
                f'recorded "{was.split(" ", 2)[2] if was else "nothing"}"')
    for kk in sorted(set(current) - set(compiled)):
        if not a.only:
            stale += 1
            say(f'STALE gate5 record {kk[0]} {dem.get(kk[1], kk[1])}: recorded, no longer compiled')
    if stale > shown:
        print(f'... and {stale - shown} more stale records')
    if stale:
        print(f'note gate5 {stale} stale records: re-derive them with `limits.py check ... --write-records` '
              f'(meson: ninja contract-write-records), never loosen a limit to match')

    red = sum(controls.values())
    kernels = len([n for n in names if 'contract_control' not in n and (not a.only or a.only in n or a.only in dem[n])])
    print(f'gate 5: nvcc {release}, records {"nvcc-" + used_set if used_set else "none"}, '
          f'{kernels} gk kernels (and {len(names) - kernels} control kernels) x {len(CHIPS)} chips ({", ".join(CHIPS)}), '
          f'{checked} launch checks')
    print(f'SUMMARY gk-contract gate 5: {kernels} kernels, known findings {n_known}, controls red {red}/{len(controls)}, '
          f'limit problems {problems}, stale records {stale}')
    if a.only is None and len(controls) == 0:
        print('FAIL gate5: no gate-5 controls were compiled')
        return 1
    return 1 if problems or red != len(controls) else 0


def cmd_compile(a):
    os.makedirs(a.out, exist_ok=True)
    stem = os.path.splitext(os.path.basename(a.src))[0]
    for i, arch in enumerate(a.archs.split(',')):
        cmd = [a.nvcc, '-cubin', f'-arch=sm_{arch}', '-o', os.path.join(a.out, f'{stem}.sm_{arch}.cubin')] + a.flags + [a.src]
        if i == 0 and a.depfile:
            cmd[1:1] = ['-MD', '-MF', a.depfile]
        r = subprocess.run(cmd)
        if r.returncode:
            return r.returncode
    if a.stamp:
        open(a.stamp, 'w').close()
    return 0


def cmd_crosscheck(a):
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, f'x.sm_{a.arch}.cubin')
        r = subprocess.run([a.nvcc, '-cubin', f'-arch=sm_{a.arch}', '-Xptxas', '-v', '-o', out] + a.flags + [a.src],
                           capture_output=True, text=True)
        if r.returncode:
            print(r.stderr)
            return r.returncode
        _rel, ks = read_cubin(out)
        cur, bad, n = None, 0, 0
        for line in r.stderr.splitlines():
            m = re.search(r"Compiling entry function '([^']+)'", line)
            if m:
                cur = m.group(1)
            m = re.search(r'Used (\d+) registers.*?(?:(\d+) bytes smem)?(?:,|$)', line)
            if m and cur:
                regs = int(m.group(1))
                sm = re.search(r'(\d+) bytes smem', line)
                smem = int(sm.group(1)) if sm else 0
                k = ks.get(cur)
                n += 1
                ok = k and k['regs'] == regs and k['smem'] == smem
                bad += not ok
                print(f"{'ok  ' if ok else 'DIFF'} {cur}: ptxas {regs} regs {smem} smem; parser "
                      f"{k['regs'] if k else '-'} regs {k['smem'] if k else '-'} smem")
                cur = None
        print(f'crosscheck sm_{a.arch}: {n} kernels, {bad} differ')
        return 1 if bad or n == 0 else 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest='cmd', required=True)
    c = sub.add_parser('compile')
    c.add_argument('--nvcc', required=True)
    c.add_argument('--src', required=True)
    c.add_argument('--out', required=True)
    c.add_argument('--archs', required=True)
    c.add_argument('--depfile')
    c.add_argument('--stamp')
    c.add_argument('flags', nargs='*')
    k = sub.add_parser('check')
    k.add_argument('--cubins', nargs='*', default=[])
    k.add_argument('--objects', nargs='*', default=[], help='host objects or static libraries holding uncompressed fatbins')
    k.add_argument('--launches', nargs='*', default=[])
    k.add_argument('--records', required=True)
    k.add_argument('--known')
    k.add_argument('--nvcc')
    k.add_argument('--only')
    k.add_argument('--write-records', action='store_true')
    k.add_argument('--verbose', action='store_true')
    x = sub.add_parser('crosscheck')
    x.add_argument('--nvcc', required=True)
    x.add_argument('--src', required=True)
    x.add_argument('--arch', required=True)
    x.add_argument('flags', nargs='*')
    a = p.parse_args()
    if a.cmd == 'check' and a.launches:
        # a launches argument may be a folder: every .txt in it
        expanded = []
        for l in a.launches:
            if os.path.isdir(l):
                expanded += sorted(os.path.join(l, f) for f in os.listdir(l) if f.endswith('.txt'))
            else:
                expanded.append(l)
        a.launches = expanded
    return {'compile': cmd_compile, 'check': cmd_check, 'crosscheck': cmd_crosscheck}[a.cmd](a)


if __name__ == '__main__':
    sys.exit(main())
