#!/usr/bin/env python3
"""bench/rss_sample.py PID OUT_PREFIX: samples a process's resident memory until
OUT_PREFIX.stop exists (or the process ends), then writes OUT_PREFIX.json: VmHWM,
the largest sampled smaps_rollup (Rss, Anonymous, file-backed, shmem) and, from the
/proc/PID/smaps read at that sample, the resident kB per kind of mapping (large
blocks, thread stacks and arena heaps, io_uring rings, the binary, shared libraries,
other anonymous). Used by bench/rss.sh; needs no third-party module.
"""
import json
import os
import sys
import time

PERIOD = 0.2


def kb_fields(text):
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[-1] == "kB":
            out[parts[0].rstrip(":")] = int(parts[1])
    return out


def read(path):
    with open(path) as f:
        return f.read()


def mappings(smaps):
    """(header, fields) per mapping of a /proc/PID/smaps text."""
    cur = None
    for line in smaps.splitlines():
        first = line.split(None, 1)[0]
        if "-" in first and not first.endswith(":"):
            if cur:
                yield cur
            cur = [line, {}]
        elif cur is not None:
            parts = line.split()
            if len(parts) >= 3 and parts[-1] == "kB":
                cur[1][parts[0].rstrip(":")] = int(parts[1])
    if cur:
        yield cur


def kind(header, fields, exe):
    parts = header.split()
    start, end = (int(x, 16) for x in parts[0].split("-"))
    size_kb = (end - start) // 1024
    name = parts[5] if len(parts) > 5 else ""
    if name == exe:
        return "binary (file)"
    if name.startswith("/"):
        return "shared libraries (file)"
    if "io_uring" in name:
        return "io_uring rings"
    if name in ("[stack]",):
        return "main stack"
    if name == "[heap]":
        return "brk heap"
    if name.startswith("["):
        return "kernel ([vdso] etc.)"
    # Blocks of 32 MiB or more: glibc maps one that large on its own (a huge
    # request body or answer), and mimalloc (builds before 2026-12-04)
    # reserved its arenas and segments that way.
    if size_kb >= 32 * 1024:
        return "32 MiB+ blocks (anon)"
    # std::thread's 2 MiB stacks and glommio's: 2 MiB .. 8 MiB + guard; but
    # a glibc arena heap grows in place up to 64 MiB and can fall here too.
    if 2048 <= size_kb <= 8196 and "w" in parts[1]:
        return "2-8 MiB anon (thread stacks, arena heaps)"
    return "other anonymous (malloc arenas, small maps)"


def main():
    pid, prefix = int(sys.argv[1]), sys.argv[2]
    exe = os.readlink(f"/proc/{pid}/exe")
    best = None
    while not os.path.exists(prefix + ".stop"):
        try:
            roll = kb_fields(read(f"/proc/{pid}/smaps_rollup"))
            if best is None or roll.get("Rss", 0) > best[0].get("Rss", 0):
                best = (roll, read(f"/proc/{pid}/smaps"))
            status = kb_fields(read(f"/proc/{pid}/status"))
        except OSError:
            break
        time.sleep(PERIOD)
    out = {"VmHWM_kB": status.get("VmHWM") if best else None}
    if best:
        roll, smaps = best
        out["rollup_kB"] = {k: roll.get(k) for k in (
            "Rss", "Anonymous", "Shared_Clean", "Private_Clean", "Private_Dirty", "Swap")}
        out["rollup_kB"]["file"] = roll.get("Rss", 0) - roll.get("Anonymous", 0)
        by = {}
        nr_stacks = 0
        for header, fields in mappings(smaps):
            k = kind(header, fields, exe)
            by[k] = by.get(k, 0) + fields.get("Rss", 0)
            if k.startswith("2-8 MiB"):
                nr_stacks += 1
        out["by_kind_kB"] = dict(sorted(by.items(), key=lambda kv: -kv[1]))
        out["nr_2_8_mib_maps"] = nr_stacks
        out["threads"] = len(os.listdir(f"/proc/{pid}/task")) if os.path.exists(f"/proc/{pid}/task") else None
        with open(prefix + ".smaps", "w") as f:
            f.write(smaps)
    with open(prefix + ".json", "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
