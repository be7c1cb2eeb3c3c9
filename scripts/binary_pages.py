#!/usr/bin/env python3
"""binary_pages.py — which of an executable's pages are resident in a running process, by section and crate.

Usage (root, so /proc/PID/pagemap shows present bits):  scripts/binary_pages.py PID [TOP]

Reads /proc/PID/maps for the mappings of the process's own executable, /proc/PID/pagemap for
each 4 KiB page's present bit (bit 63) or swapped bit (62), maps every present page back to a
virtual address of the ELF file (its LOAD segments), to the section holding it (`readelf -SW`) and
to the symbols overlapping it (`nm -n -S --demangle`). A page's 4 KiB are split between the
symbols it overlaps in proportion to the bytes each covers; bytes no symbol covers count as the
section's (e.g. `.rodata` string literals, `.eh_frame`). Symbols are grouped by crate: the first
`name::` path segment of the demangled name (generic instantiations count under the crate of
their first path, usually the type's). Prints MiB per section, per crate within .text and
.rodata-like sections, and the TOP symbols.
"""
import bisect, collections, os, re, struct, subprocess, sys

PAGE = 4096


def resident_pages(pid, exe):
    """The ELF virtual address of every page of `exe` that process `pid` has resident (present,
    or swapped out), from /proc/PID/maps and /proc/PID/pagemap mapped back through the LOAD
    segments of `readelf -lW`."""
    segs = []  # (file offset, vaddr, filesz)
    for line in subprocess.run(["readelf", "-lW", exe], capture_output=True, text=True, check=True).stdout.splitlines():
        f = line.split()
        if f and f[0] == "LOAD":
            segs.append((int(f[1], 16), int(f[2], 16), int(f[4], 16)))
    present = []
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
                if e >> 63 & 1 or e >> 62 & 1:
                    fo = off + i * PAGE
                    for so, sv, sz in segs:
                        if so <= fo < so + sz + PAGE:
                            present.append(sv - so + fo)
                            break
    return present


def main():
    pid = int(sys.argv[1])
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 25
    exe = os.readlink(f"/proc/{pid}/exe")
    secs = []  # (vaddr, size, name)
    for line in subprocess.run(["readelf", "-SW", exe], capture_output=True, text=True, check=True).stdout.splitlines():
        m = re.match(r"\s*\[\s*\d+\]\s+(\S+)\s+\S+\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)", line)
        if m and int(m.group(2), 16):
            secs.append((int(m.group(2), 16), int(m.group(3), 16), m.group(1)))
    secs.sort()
    syms = []  # (addr, size, name)
    out = subprocess.run(["nm", "-n", "-S", "--demangle", exe], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        m = re.match(r"([0-9a-f]+) (?:([0-9a-f]+) )?([tTdDrRbBvVwW]) (.*)", line)
        if m:
            syms.append((int(m.group(1), 16), int(m.group(2) or "0", 16), m.group(4)))
    syms.sort()
    starts = [s[0] for s in syms]

    present = resident_pages(pid, exe)

    by_sec = collections.Counter()
    by_crate = collections.defaultdict(collections.Counter)
    by_sym = collections.Counter()
    for va in present:
        covered = 0
        j = max(bisect.bisect_right(starts, va) - 1, 0)
        sec = section_of(secs, va)
        while j < len(syms) and syms[j][0] < va + PAGE:
            a, sz, name = syms[j]
            lo, hi = max(a, va), min(a + max(sz, 1), va + PAGE)
            if hi > lo:
                covered += hi - lo
                by_crate[sec][crate(name)] += hi - lo
                by_sym[name] += hi - lo
            j += 1
        covered = min(covered, PAGE)
        by_crate[sec]["(no symbol)"] += PAGE - covered
        by_sec[sec] += PAGE
    mib = lambda b: b / 1048576
    print(f"{exe}: {mib(len(present) * PAGE):.1f} MiB resident in {len(present)} pages")
    for sec, b in by_sec.most_common():
        print(f"\n{sec}: {mib(b):.2f} MiB")
        for c, cb in by_crate[sec].most_common(25):
            print(f"    {c:32} {mib(cb):6.2f}")
    print(f"\ntop {top} symbols (bytes on resident pages):")
    for s, b in by_sym.most_common(top):
        print(f"  {b:9d}  {s[:150]}")


def section_of(secs, va):
    i = bisect.bisect_right([s[0] for s in secs], va) - 1
    if i >= 0 and va < secs[i][0] + secs[i][1]:
        return secs[i][2]
    return "(between sections)"


def crate(name):
    m = re.search(r"([A-Za-z_][A-Za-z0-9_]*)::", name)
    return m.group(1) if m else "(C / unmangled)"


if __name__ == "__main__":
    main()
