"""pymemcache against a running memcached-protocol server: a real workload, every answer checked.

Usage: pymemcache_check.py MEMCACHE_PORT [RESP_PORT]

The same script runs against memcached 1.6 (which proves its expectations) and against directkv;
with RESP_PORT (directkv only) it also checks that keys cross between the two protocols with
redis-py. Expiry is checked with absolute exptimes (2033, the past) and negative ones, which do
not depend on the clock, and once with a one-second exptime, polled with a deadline.
"""
import socket
import sys
import time

from pymemcache import serde
from pymemcache.client.base import Client

port = int(sys.argv[1])
resp_port = int(sys.argv[2]) if len(sys.argv) > 2 else None
FUTURE = 2_000_000_000  # an absolute Unix time in 2033
PAST = 1_000_000_000  # an absolute Unix time in 2001

c = Client(("127.0.0.1", port), default_noreply=False, connect_timeout=5, timeout=10)
c.flush_all()

# Plain items.
assert c.set("py:k", b"v") is True
assert c.get("py:k") == b"v"
assert c.get("py:none") is None
assert c.set("py:big", b"x" * 500_000) is True
assert c.get("py:big") == b"x" * 500_000
assert c.set("py:empty", b"") is True
assert c.get("py:empty") == b""
assert c.set("py:bin", bytes(range(256))) is True
assert c.get("py:bin") == bytes(range(256))

# Many at once: set_many returns the keys it failed to store.
items = {f"py:m{i}": str(i).encode() for i in range(200)}
assert c.set_many(items) == []
got = c.get_many(list(items) + ["py:absent"])
assert got == items, (len(got), len(items))

# add / replace / append / prepend.
assert c.add("py:k", b"other") is False
assert c.add("py:new", b"n") is True
assert c.replace("py:new", b"r") is True
assert c.replace("py:nothere", b"r") is False
assert c.append("py:new", b"-end") is True
assert c.prepend("py:new", b"start-") is True
assert c.get("py:new") == b"start-r-end"
assert c.append("py:nothere", b"x") is False

# CAS: gets hands out a token; a change in between makes it stale.
value, token = c.gets("py:k")
assert value == b"v" and token is not None
assert c.cas("py:k", b"v2", token) is True
assert c.cas("py:k", b"v3", token) is False  # stale: EXISTS
assert c.get("py:k") == b"v2"
assert c.cas("py:missing", b"x", b"1") is None  # NOT_FOUND
_, t1 = c.gets("py:k")
_, t2 = c.gets("py:k")
assert t1 == t2, "a read must not change the CAS"
c.touch("py:k", FUTURE)
_, t3 = c.gets("py:k")
assert c.cas("py:k", b"after-touch", t3) is True
many = c.gets_many(["py:k", "py:new"])
assert set(many) == {"py:k", "py:new"} and all(tok for _, tok in many.values())

# incr / decr: 64-bit unsigned, wrap on incr, stop at 0 on decr.
assert c.set("py:n", b"10") is True
assert c.incr("py:n", 5) == 15
assert c.decr("py:n", 20) == 0
assert c.incr("py:n", 2**64 - 1) == 2**64 - 1
assert c.incr("py:n", 2) == 1
assert c.incr("py:nothere", 1) is None
assert c.decr("py:nothere", 1) is None
assert c.set("py:text", b"abc") is True
try:
    c.incr("py:text", 1)
    raise AssertionError("incr of a non-number accepted")
except Exception as e:  # MemcacheClientError
    assert "non-numeric" in str(e), e

# delete.
assert c.delete("py:new") is True
assert c.delete("py:new") is False
assert c.get("py:new") is None
assert c.delete_many(["py:m0", "py:m1"]) is True
assert c.get("py:m0") is None

# Expiry by absolute times (clock-independent), negative, and a real one-second expiry.
assert c.set("py:future", b"f", expire=FUTURE) is True
assert c.get("py:future") == b"f"
assert c.set("py:past", b"p", expire=PAST) is True
assert c.get("py:past") is None
assert c.set("py:neg", b"n", expire=-1) is True
assert c.get("py:neg") is None
assert c.set("py:touched", b"t") is True
assert c.touch("py:touched", PAST) is True
assert c.get("py:touched") is None
assert c.touch("py:nothere", FUTURE) is False
assert c.set("py:gat", b"g") is True
# pymemcache 4 has no gat; raw_command sends a line and returns what came before END.
assert c.raw_command(b"gat %d py:gat" % FUTURE, b"END\r\n") == b"VALUE py:gat 0 1\r\ng\r\n"
gats = c.raw_command(b"gats %d py:gat" % PAST, b"END\r\n")
assert gats.startswith(b"VALUE py:gat 0 1 ") and gats.endswith(b"\r\ng\r\n"), gats
assert c.get("py:gat") is None  # gat with a past exptime expired it
assert c.set("py:short", b"s", expire=1) is True
deadline = time.monotonic() + 10
while c.get("py:short") is not None:
    assert time.monotonic() < deadline, "a one-second item still there after 10 s"
    time.sleep(0.05)

# noreply: nothing comes back, the next command's answer is its own.
c2 = Client(("127.0.0.1", port), default_noreply=True, timeout=10)
for i in range(50):
    c2.set(f"py:q{i}", str(i).encode())
c2.delete("py:q0")
c2.incr("py:q1", 10)
assert c2.get("py:q49") == b"49"
assert c2.get("py:q0") is None
assert c2.get("py:q1") == b"11"

# pickle serde: flags say how to read the bytes back.
p = Client(("127.0.0.1", port), serde=serde.pickle_serde, default_noreply=False, timeout=10)
objects = {
    "py:s:str": "text é",
    "py:s:int": 42,
    "py:s:dict": {"a": [1, 2.5, None], "b": (True, b"raw")},
    "py:s:bytes": b"\x00\xff",
}
for k, v in objects.items():
    assert p.set(k, v) is True
for k, v in objects.items():
    assert p.get(k) == v, (k, p.get(k))
assert p.get_many(list(objects)) == objects


def raw(command):
    """One command over a raw socket, for what pymemcache hides (flags)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(command)
        buf = b""
        while not buf.endswith(b"END\r\n"):
            chunk = s.recv(65536)
            assert chunk, buf
            buf += chunk
        return buf


# pymemcache's pickle serde: 1 = pickled, 2 = int, 16 = text.
assert raw(b"get py:s:dict\r\n").startswith(b"VALUE py:s:dict 1 ")
assert raw(b"get py:s:int\r\n") == b"VALUE py:s:int 2 2\r\n42\r\nEND\r\n"
assert raw(b"get py:s:str\r\n").startswith(b"VALUE py:s:str 16 ")

# stats and version.
stats = c.stats()
for field in (b"pid", b"uptime", b"curr_items", b"total_items", b"cmd_get", b"get_hits",
              b"curr_connections", b"version"):
    assert field in stats, (field, sorted(stats))
assert stats[b"curr_items"] > 100, stats[b"curr_items"]
assert c.version()

# flush_all empties it.
assert c.flush_all() is True
assert c.get("py:k") is None
assert c.get_many(list(items)) == {}

if resp_port is not None:
    import redis

    r = redis.Redis(host="127.0.0.1", port=resp_port)
    r.set("py:resp", "from-resp")
    assert c.get("py:resp") == b"from-resp"
    _, token = c.gets("py:resp")
    r.set("py:resp", "changed")
    assert c.cas("py:resp", b"x", token) is False, "a RESP write must change the CAS"
    assert c.set("py:mc", b"from-mc", expire=FUTURE) is True
    assert r.get("py:mc") == b"from-mc"
    assert r.expiretime("py:mc") == FUTURE, r.expiretime("py:mc")
    assert c.set("py:mcn", b"7") is True
    assert r.incr("py:mcn") == 8
    assert c.incr("py:mcn", 1) == 9

c.quit()
print("pymemcache ok")
