#!/usr/bin/env python3
"""The machine's own limit for `appendfsync always` (issue 22): how many write(2) + fdatasync
rounds per second one thread gets on this file system, the wall time of each, and the CPU time
the process is charged for them (the kernel's writeback work lands on the caller).

    python3 scripts/fsync-probe.py [DIR] [SECONDS] [BYTES]

Each round appends BYTES (default 1024: a few batches' records) to a file in DIR (default
/tmp) and fdatasyncs it, as the server's sync thread does once per group of batches. With C
connections each keeping one batch of D operations in flight, a server that fsyncs once per
round of their batches answers at most C x D x rounds/s operations per second; on one core it
also needs (CPU per round) / (C x D) of that core per operation for the syncs alone.
"""
import os
import statistics
import sys
import tempfile
import time

d = sys.argv[1] if len(sys.argv) > 1 else "/tmp"
seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
size = int(sys.argv[3]) if len(sys.argv) > 3 else 1024
fd, path = tempfile.mkstemp(dir=d, prefix="fsync-probe-")
try:
    buf = b"x" * size
    walls = []
    t0 = time.monotonic()
    c0 = os.times()
    while time.monotonic() - t0 < seconds:
        a = time.monotonic()
        os.write(fd, buf)
        os.fdatasync(fd)
        walls.append(time.monotonic() - a)
    c1 = os.times()
    elapsed = time.monotonic() - t0
    cpu = (c1.user - c0.user) + (c1.system - c0.system)
    n = len(walls)
    walls.sort()
    print(
        f"fsync probe ({d}, {size} B per round): {n / elapsed:.0f} rounds/s, "
        f"wall p50 {walls[n // 2] * 1e6:.0f} us p99 {walls[min(n - 1, n * 99 // 100)] * 1e6:.0f} us, "
        f"CPU {cpu / n * 1e6:.0f} us per round (user {(c1.user - c0.user) / n * 1e6:.0f}, "
        f"sys {(c1.system - c0.system) / n * 1e6:.0f}); bound at 4 connections x depth 64: "
        f"{4 * 64 * n / elapsed / 1e6:.2f} M ops/s"
    )
finally:
    os.close(fd)
    os.unlink(path)
