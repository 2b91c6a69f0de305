#!/usr/bin/env python3
"""issue 22, `always` against this machine's bound, all in one run (medians of ROUNDS):

  1. `bench compare --appendfsync always` (YCSB-A, 1 M keys, 4 connections x depth 64, pinned):
     directkv in memory (directkv-resp), directkv-aof and redis-aof, seats rotated per round;
  2. the echo pair with a log (`bench loopback --fsync-dir`): a server that does nothing but
     one fdatasync per round of the 4 connections' batches (RESP YCSB-A batch bytes, a
     665-byte record per batch, as directkv writes);
  3. the same echo with a stand-in for a store's work (`--work-lines K`, random line reads per
     batch), K calibrated in the round so that the echo without a log answers about what
     directkv does in memory: a server with directkv's work per batch, an ideal group commit
     and no other cost of durability.

    python3 scripts/persist/always-bound.py [ROUNDS]

What it shows: directkv-aof against (3), what a server doing directkv's work answers under
`always` on these cores when it syncs inline (its core halts during each fdatasync, so a server
that polls through it can do a little better: BENCHMARKS "Session 20"), and 4 x redis-aof
against both.
"""
import json
import statistics
import subprocess
import sys

BIN = "target/release/directkv"
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
ORDERS = [
    "directkv-resp,directkv-aof,redis-aof",
    "redis-aof,directkv-resp,directkv-aof",
    "directkv-aof,redis-aof,directkv-resp",
]
ECHO = [BIN, "bench", "loopback", "--json", "--request-bytes", "2176", "--response-bytes", "608"]
LOG = ["--fsync-dir", "/tmp", "--record-bytes", "665"]
WORK_GRID = [256, 384, 512, 640, 768, 1024, 1280]


def echo(seconds, work=0, log=False):
    cmd = ECHO + ["--seconds", str(seconds), "--work-lines", str(work)] + (LOG if log else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)["ops_per_sec"]


def compare(order):
    cmd = [BIN, "bench", "compare", "--workload", "ycsb-a", "--keys", "1000000", "--depth", "64",
           "--connections", "4", "--targets", order, "--appendfsync", "always",
           "--no-echo-reference", "--json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return {r["name"]: r["run"]["ops_per_sec"] for r in json.loads(out)["rows"]}


rows = []
for i in range(ROUNDS):
    c = compare(ORDERS[i % len(ORDERS)])
    mem = c["directkv-resp"]
    # The work whose echo without a log comes closest to directkv in memory.
    k, free = min(((k, echo(1, k)) for k in WORK_GRID), key=lambda kv: abs(kv[1] - mem))
    null = echo(3, 0, True)
    worked = echo(3, k, True)
    r = dict(mem=mem, aof=c["directkv-aof"], redis=c["redis-aof"], k=k, free=free, null=null,
             worked=worked)
    rows.append(r)
    print(
        f"round {i + 1}: directkv in memory {mem / 1e6:.2f} M, directkv-aof {r['aof'] / 1e6:.2f} M, "
        f"redis-aof {r['redis'] / 1e3:.0f} k ({r['aof'] / r['redis']:.2f} x); echo+fsync no work "
        f"{null / 1e6:.2f} M; echo with {k} line reads per batch {free / 1e6:.2f} M without a log, "
        f"{worked / 1e6:.2f} M with one (directkv-aof = {r['aof'] / worked:.2f} of it; "
        f"4 x redis-aof = {4 * r['redis'] / worked:.2f} of it)",
        flush=True,
    )


def med(key):
    return statistics.median(r[key] for r in rows)


print(
    f"medians of {len(rows)}: directkv-aof {med('aof') / 1e6:.2f} M = "
    f"{statistics.median(r['aof'] / r['redis'] for r in rows):.2f} x redis-aof, "
    f"{statistics.median(r['aof'] / r['mem'] for r in rows):.2f} x in memory; "
    f"echo+fsync no work {med('null') / 1e6:.2f} M "
    f"({statistics.median(r['null'] / r['mem'] for r in rows):.2f} x directkv in memory); "
    f"echo+fsync with directkv's work {med('worked') / 1e6:.2f} M "
    f"(directkv-aof {statistics.median(r['aof'] / r['worked'] for r in rows):.2f} of it, "
    f"4 x redis-aof {statistics.median(4 * r['redis'] / r['worked'] for r in rows):.2f} of it)"
)
