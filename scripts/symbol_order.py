#!/usr/bin/env python3
"""symbol_order.py — the symbols on the pages a running process touched of its executable, for
the linker's --symbol-ordering-file.

Usage (root, so /proc/PID/pagemap shows present bits):  scripts/symbol_order.py PID > ORDER

Prints, in address order, the (mangled) name of every function and data symbol of the process's
own executable that overlaps a resident page. Meant to run on a host started with the
executable's pages out of the page cache and no read-ahead (scripts/symbol_order.sh sets that
up), so that "resident" means "touched": the linker then packs those symbols together at the
start of their sections, and the pages start-up and the steady path touch are a few MiB in one
place instead of single functions spread over the whole 28 MiB of .text (each of which the
kernel's fault-around maps with its 64 KiB neighbourhood).
"""
import bisect, os, struct, subprocess, sys

PAGE = 4096


def main():
    pid = int(sys.argv[1])
    exe = os.readlink(f"/proc/{pid}/exe")
    segs = []  # (file offset, vaddr, filesz)
    for line in subprocess.run(["readelf", "-lW", exe], capture_output=True, text=True, check=True).stdout.splitlines():
        f = line.split()
        if f and f[0] == "LOAD":
            segs.append((int(f[1], 16), int(f[2], 16), int(f[4], 16)))
    syms = []  # (addr, size, mangled name)
    out = subprocess.run(["nm", "-n", "-S", "--defined-only", exe], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        f = line.split()
        if len(f) == 4 and f[2] in "tTrRdD" and int(f[1], 16) > 0:
            syms.append((int(f[0], 16), int(f[1], 16), f[3]))
    syms.sort()
    starts = [s[0] for s in syms]

    touched = set()
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/pagemap", "rb") as pm:
        for line in maps:
            f = line.split()
            if len(f) < 6 or f[5] != exe:
                continue
            lo, hi = (int(x, 16) for x in f[0].split("-"))
            off = int(f[2], 16)
            pm.seek(lo // PAGE * 8)
            data = pm.read((hi - lo) // PAGE * 8)
            for i in range((hi - lo) // PAGE):
                (e,) = struct.unpack_from("<Q", data, i * 8)
                if not (e >> 63 & 1):
                    continue
                fo = off + i * PAGE
                for so, sv, sz in segs:
                    if so <= fo < so + sz:
                        page = sv + (fo - so)
                        # every symbol overlapping [page, page + PAGE)
                        j = max(bisect.bisect_right(starts, page) - 1, 0)
                        while j < len(syms) and syms[j][0] < page + PAGE:
                            a, size, name = syms[j]
                            if a + size > page:
                                touched.add(j)
                            j += 1
                        break
    seen = set()
    for j in sorted(touched):
        name = syms[j][2]
        if name not in seen:
            seen.add(name)
            print(name)
    total = sum(syms[j][1] for j in touched)
    print(f"{len(seen)} symbols, {total / 2**20:.1f} MiB, from {exe}", file=sys.stderr)


if __name__ == "__main__":
    main()
