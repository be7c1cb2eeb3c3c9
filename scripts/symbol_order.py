#!/usr/bin/env python3
"""symbol_order.py — the symbols on the pages a running process touched of its executable, for
the linker's --symbol-ordering-file.

Usage (root, so /proc/PID/pagemap shows present bits):  scripts/symbol_order.py PID [NAMES_OF] > ORDER

Prints, in address order, the (mangled) name of every function and data symbol of the process's
own executable that overlaps a resident page. Meant to run on a host started with the
executable's pages out of the page cache and no read-ahead (scripts/symbol_order.sh sets that
up), so that "resident" means "touched": the linker then packs those symbols together at the
start of their sections, and the pages start-up and the steady path touch are a few MiB in one
place instead of single functions spread over the whole 28 MiB of .text (each of which the
kernel's fault-around maps with its 64 KiB neighbourhood).

NAMES_OF: another build of the same code whose names to print. The process then runs a build with
every function on a page of its own (RUSTFLAGS="-C llvm-args=-align-all-functions=12"), so a
touched page names one function instead of the ten or so that share a page normally; its names
are mapped onto NAMES_OF's by their base (see `base`), every NAMES_OF symbol of a touched base
printed.
"""
import bisect, collections, os, re, subprocess, sys

from binary_pages import PAGE, resident_pages


def main():
    pid = int(sys.argv[1])
    exe = os.readlink(f"/proc/{pid}/exe")
    syms = []  # (addr, size, mangled name)
    out = subprocess.run(["nm", "-n", "-S", "--defined-only", exe], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        f = line.split()
        if len(f) == 4 and f[2] in "tTrRdD" and int(f[1], 16) > 0:
            syms.append((int(f[0], 16), int(f[1], 16), f[3]))
    syms.sort()
    starts = [s[0] for s in syms]

    touched = set()
    for page in resident_pages(pid, exe):
        # every symbol overlapping [page, page + PAGE)
        j = max(bisect.bisect_right(starts, page) - 1, 0)
        while j < len(syms) and syms[j][0] < page + PAGE:
            a, size, name = syms[j]
            if a + size > page:
                touched.add(j)
            j += 1
    names = [syms[j][2] for j in sorted(touched)]
    total = sum(syms[j][1] for j in touched)
    print(f"{len(set(names))} symbols, {total / 2**20:.1f} MiB, touched in {exe}", file=sys.stderr)
    if len(sys.argv) > 2:
        names = mapped(names, sys.argv[2])
    seen = set()
    for name in names:
        if name not in seen:
            seen.add(name)
            print(name)


def base(name):
    """The name without what differs between two builds of the same code: LLVM's `.llvm.NNNN`
    suffix of promoted local symbols, and the legacy mangling's hash (`17h` + 16 hex digits),
    which covers the crate's metadata (so RUSTFLAGS). Instances of one generic function share a
    base, so all of them are listed when one was touched."""
    name = re.sub(r"\.llvm\.\d+$", "", name)
    return re.sub(r"17h[0-9a-f]{16}E$", "E", name)


def mapped(names, other):
    """`names` (in order) as the symbols of `other` with the same base, each base's in address order."""
    by_base = collections.defaultdict(list)
    out = subprocess.run(["nm", "-n", "-S", "--defined-only", other], capture_output=True, text=True, check=True).stdout
    size = 0
    for line in out.splitlines():
        f = line.split()
        if len(f) == 4 and f[2] in "tTrRdD" and int(f[1], 16) > 0:
            by_base[base(f[3])].append((f[3], int(f[1], 16)))
    result, done = [], set()
    for name in names:
        b = base(name)
        if b in done:
            continue
        done.add(b)
        for n, sz in by_base.get(b, []):
            result.append(n)
            size += sz
    print(f"{len(result)} symbols, {size / 2**20:.1f} MiB, in {other}", file=sys.stderr)
    return result


if __name__ == "__main__":
    main()
