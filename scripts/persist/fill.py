#!/usr/bin/env python3
"""SETs 100-byte values one per round trip until the first error reply (a full disk's MISCONF),
appending each acknowledged key to OUT (issue 22, BENCHMARKS "Session 19": a failed store
repairs itself).

    python3 scripts/persist/fill.py PORT FIRST COUNT OUT
"""
import socket, sys, time
port=int(sys.argv[1]); start=int(sys.argv[2]); n=int(sys.argv[3]); out=sys.argv[4]
s=socket.create_connection(("127.0.0.1",port)); f=s.makefile("rb")
acked=[]; first_err=None
for i in range(start, start+n):
    k=f"k{i}"; v="x"*100
    s.sendall(f"*3\r\n$3\r\nSET\r\n${len(k)}\r\n{k}\r\n${len(v)}\r\n{v}\r\n".encode())
    line=f.readline()
    if line==b"+OK\r\n": acked.append(k)
    else:
        first_err=line; break
open(out,"a").write("\n".join(acked)+"\n")
print(f"acked {len(acked)} from {start}, then {first_err!r}")
