"""redis-py's scan_iter against a server holding exactly the keys key:0 .. key:N-1 (issue 20):
every key comes back exactly once, with and without MATCH, with COUNT small and large, and a
keyspace smaller than COUNT is one SCAN call that answers cursor 0.

Usage: redis_py_scan.py PORT N
"""

import collections
import sys

import redis


def once(found, want, what):
    counts = collections.Counter(found)
    twice = [k for k, c in counts.items() if c > 1]
    assert not twice, f"{what}: {len(twice)} keys came more than once, e.g. {twice[:3]}"
    assert set(counts) == want, (
        f"{what}: {len(want - set(counts))} missing, {len(set(counts) - want)} unexpected"
    )


def main():
    port, n = int(sys.argv[1]), int(sys.argv[2])
    r = redis.Redis(port=port)
    want = {b"key:%d" % i for i in range(n)}
    once(r.scan_iter(), want, "scan_iter()")
    once(r.scan_iter(count=1000), want, "scan_iter(count=1000)")
    ones = {k for k in want if k.startswith(b"key:1")}
    once(r.scan_iter(match="key:1*"), ones, "scan_iter(match='key:1*')")
    once(r.keys("*"), want, "keys('*')")
    if n < 10:
        cursor, keys = r.scan(0)
        assert cursor == 0, f"SCAN 0 on {n} keys answered cursor {cursor}"
        once(keys, want, "one SCAN call")
    print("ok")


if __name__ == "__main__":
    main()
