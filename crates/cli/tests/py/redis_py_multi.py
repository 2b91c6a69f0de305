"""redis-py transactions against a running directkv: pipeline() (transaction=True, its
default), transaction(func, *watches) with WATCH, and two processes' WATCH retry loops
incrementing one counter with GET + SET, whose final value must be exact."""
import multiprocessing
import sys

import redis

port = int(sys.argv[1])
ROUNDS = 300


def bump(proto):
    """ROUNDS increments of py:counter by read, then write, under WATCH."""
    r = redis.Redis(host="127.0.0.1", port=port, protocol=proto)

    def add_one(pipe):
        n = int(pipe.get("py:counter") or 0)
        pipe.multi()
        pipe.set("py:counter", n + 1)

    for _ in range(ROUNDS):
        r.transaction(add_one, "py:counter")


for proto in (2, 3):
    r = redis.Redis(host="127.0.0.1", port=port, protocol=proto)
    assert r.flushall() is True
    # pipeline(): MULTI ... EXEC, replies in order, keys on both shards.
    p = r.pipeline()
    for i in range(20):
        p.set(f"py:t{i}", i)
    p.incr("py:t0")
    p.mget("py:t0", "py:t19", "py:none")
    p.get("py:t5")
    assert p.execute() == [True] * 20 + [1, [b"1", b"19", None], b"5"]
    # A run-time error is that command's result; the others ran.
    p = r.pipeline()
    p.set("py:s", "text")
    p.incr("py:s")
    p.set("py:after", "1")
    res = p.execute(raise_on_error=False)
    assert res[0] is True and isinstance(res[1], redis.ResponseError) and res[2] is True, res
    assert r.get("py:after") == b"1"
    # WATCH, then another client's write: WatchError, nothing run.
    other = redis.Redis(host="127.0.0.1", port=port, protocol=proto)
    with r.pipeline() as p:
        p.watch("py:w")
        other.set("py:w", "changed")
        p.multi()
        p.set("py:w", "mine")
        try:
            p.execute()
            raise AssertionError("EXEC ran although a watched key changed")
        except redis.WatchError:
            pass
    assert r.get("py:w") == b"changed"
    # transaction(): the helper retries on WatchError and returns the EXEC results.
    assert r.transaction(lambda pipe: (pipe.multi(), pipe.incr("py:w2")), "py:w2") == [1]
    # Two processes, each ROUNDS read-modify-write increments under WATCH.
    workers = [multiprocessing.Process(target=bump, args=(proto,)) for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(120)
        assert w.exitcode == 0, w.exitcode
    assert int(r.get("py:counter")) == 2 * ROUNDS, r.get("py:counter")
print("redis-py transactions ok")
