"""redis-py in depth against a running server: python3 redis_py_depth.py PORT PART...

Run by crates/cli/tests/it/clients.rs, first against redis-server (which proves the checks), then
against `directkv serve`. Each PART is a switch, so what a server cannot do yet is run apart:

  plain   asyncio (redis.asyncio, concurrent clients, an async pipeline), RESP3 (protocol=3:
          the HELLO 3 map, the Python types of GET/SET/INCR/MGET replies), and
          pipeline(transaction=False) of plain commands
  expiry  set(ex=/px=), ttl, pttl, expire, persist, getex, setex, pexpireat in the past, and
          pipeline(transaction=False) and asyncio with expiring keys, over RESP2 and RESP3
  multi   pipeline() (transaction=True, MULTI/EXEC) with EX/PX keys, EXECABORT after a
          rejected command, transaction() with WATCH, and EXEC answering nil after another
          client changed a watched key

Keys are prefixed "pyd:"; the script does not flush the server. Expiry windows are wide (tens
of seconds) so a slow machine cannot fail it. Any mismatch raises (exit status 1, traceback
naming the check); "redis-py depth ok" and exit status 0 mean every check passed.
"""
import asyncio
import sys
import warnings

import redis
import redis.asyncio

HOST = "127.0.0.1"
# Concurrent asyncio INCRs: the total must be exact.
ASYNC_INCRS = 200
# Connections of the asyncio pool the concurrent INCRs share (tasks wait for a free one).
ASYNC_CONNECTIONS = 16
# Commands in the pipelines.
PIPELINE_COMMANDS = 500


def eq(what, expected, actual):
    if expected != actual:
        raise AssertionError(f"{what}: expected {expected!r}, got {actual!r}")


def within(what, low, high, actual):
    if not isinstance(actual, int) or not low <= actual <= high:
        raise AssertionError(f"{what}: expected an int in {low}..{high}, got {actual!r}")


def clients(port):
    """One client per protocol version: every sync check runs over RESP2 and RESP3."""
    return [redis.Redis(host=HOST, port=port, protocol=p) for p in (2, 3)]


def resp3(port):
    r = redis.Redis(host=HOST, port=port, protocol=3)
    hello = r.execute_command("HELLO", "3")
    eq("HELLO 3 reply type", dict, type(hello))
    keys = {k.decode() if isinstance(k, bytes) else k for k in hello}
    for field in ("server", "version", "proto", "id", "mode", "role", "modules"):
        if field not in keys:
            raise AssertionError(f"HELLO 3 map lacks {field!r}: {hello!r}")
    proto = hello.get(b"proto", hello.get("proto"))
    eq("HELLO 3 proto", 3, proto)
    r.delete("pyd:r3:k", "pyd:r3:n")
    eq("RESP3 SET", True, r.set("pyd:r3:k", "v"))
    eq("RESP3 GET", b"v", r.get("pyd:r3:k"))
    eq("RESP3 GET missing", None, r.get("pyd:r3:missing"))
    eq("RESP3 INCR", 1, r.incr("pyd:r3:n"))
    eq("RESP3 INCR type", int, type(r.incr("pyd:r3:n")))
    eq("RESP3 MGET", [b"v", None, b"2"], r.mget("pyd:r3:k", "pyd:r3:missing", "pyd:r3:n"))
    eq("RESP3 EXISTS", 2, r.exists("pyd:r3:k", "pyd:r3:n", "pyd:r3:missing"))
    eq("RESP3 PING", True, r.ping())
    try:
        r.incr("pyd:r3:k")
        raise AssertionError("INCR of a non-integer accepted")
    except redis.ResponseError as e:
        eq("RESP3 INCR error", "value is not an integer or out of range", str(e))
    eq("RESP3 GET after an error", b"v", r.get("pyd:r3:k"))
    r.close()


def plain_pipeline(port):
    for r in clients(port):
        p = r.pipeline(transaction=False)
        p.delete("pyd:pp:n")
        for i in range(PIPELINE_COMMANDS // 2):
            p.set(f"pyd:pp:{i}", f"v{i}")
            p.incr("pyd:pp:n")
        got = p.execute()
        eq("pipeline reply count", 1 + PIPELINE_COMMANDS, len(got))
        eq("pipelined SET replies", [True] * (PIPELINE_COMMANDS // 2), got[1::2])
        eq("pipelined INCR replies", list(range(1, PIPELINE_COMMANDS // 2 + 1)), got[2::2])
        keys = [f"pyd:pp:{i}" for i in range(PIPELINE_COMMANDS // 2)]
        eq("MGET of the pipelined keys", [f"v{i}".encode() for i in range(len(keys))], r.mget(keys))
        r.close()


async def plain_async(port):
    for proto in (2, 3):
        pool = redis.asyncio.BlockingConnectionPool(
            host=HOST, port=port, protocol=proto, max_connections=ASYNC_CONNECTIONS
        )
        r = redis.asyncio.Redis.from_pool(pool)
        eq("async PING", True, await r.ping())
        await r.delete("pyd:as:n", "pyd:as:k")
        eq("async SET", True, await r.set("pyd:as:k", "av"))
        eq("async GET", b"av", await r.get("pyd:as:k"))
        eq("async MSET", True, await r.mset({"pyd:as:a": "1", "pyd:as:b": "2"}))
        eq("async MGET", [b"1", b"2", None], await r.mget("pyd:as:a", "pyd:as:b", "pyd:as:x"))
        # Concurrent INCRs over 16 connections of the pool: the total is exact.
        got = await asyncio.gather(*(r.incr("pyd:as:n") for _ in range(ASYNC_INCRS)))
        eq("async concurrent INCR replies", list(range(1, ASYNC_INCRS + 1)), sorted(got))
        eq("async counter", str(ASYNC_INCRS).encode(), await r.get("pyd:as:n"))
        async with r.pipeline(transaction=False) as p:
            for i in range(100):
                p.set(f"pyd:as:p{i}", i)
            p.get("pyd:as:p99")
            got = await p.execute()
        eq("async pipeline last reply", b"99", got[-1])
        eq("async DEL", 2, await r.delete("pyd:as:a", "pyd:as:b"))
        await r.aclose()


def expiry(port):
    for r in clients(port):
        r.delete("pyd:ex", "pyd:px", "pyd:e", "pyd:sx", "pyd:gx", "pyd:past")
        eq("set ex=10", True, r.set("pyd:ex", "v", ex=10))
        within("ttl after ex=10", 1, 10, r.ttl("pyd:ex"))
        eq("set px=50000", True, r.set("pyd:px", "v", px=50_000))
        within("pttl after px=50000", 1, 50_000, r.pttl("pyd:px"))
        eq("get of an expiring key", b"v", r.get("pyd:px"))
        eq("ttl of a missing key", -2, r.ttl("pyd:e"))
        r.set("pyd:e", "v")
        eq("ttl without expiry", -1, r.ttl("pyd:e"))
        eq("expire", True, r.expire("pyd:e", 100))
        within("ttl after expire 100", 1, 100, r.ttl("pyd:e"))
        eq("expire of a missing key", False, r.expire("pyd:missing", 100))
        eq("persist", True, r.persist("pyd:e"))
        eq("ttl after persist", -1, r.ttl("pyd:e"))
        eq("persist without expiry", False, r.persist("pyd:e"))
        with warnings.catch_warnings():
            # redis-py marks setex deprecated (for set(ex=)); clients still call it.
            warnings.simplefilter("ignore", DeprecationWarning)
            eq("setex", True, r.setex("pyd:sx", 30, "sv"))
        within("ttl after setex 30", 1, 30, r.ttl("pyd:sx"))
        r.set("pyd:gx", "g")
        eq("getex ex=50", b"g", r.getex("pyd:gx", ex=50))
        within("ttl after getex ex=50", 1, 50, r.ttl("pyd:gx"))
        eq("getex persist", b"g", r.getex("pyd:gx", persist=True))
        eq("ttl after getex persist", -1, r.ttl("pyd:gx"))
        eq("getex of a missing key", None, r.getex("pyd:missing", ex=5))
        r.set("pyd:past", "p")
        eq("pexpireat in the past", True, r.pexpireat("pyd:past", 1000))
        eq("exists after pexpireat in the past", 0, r.exists("pyd:past"))
        eq("get after pexpireat in the past", None, r.get("pyd:past"))

        p = r.pipeline(transaction=False)
        for i in range(PIPELINE_COMMANDS // 4):
            p.set(f"pyd:pe:{i}", i, ex=100)
            p.ttl(f"pyd:pe:{i}")
            p.set(f"pyd:pp:{i}", i, px=100_000)
            p.pttl(f"pyd:pp:{i}")
        got = p.execute()
        eq("expiry pipeline SET replies", [True] * (PIPELINE_COMMANDS // 2), got[0::2])
        for n, t in enumerate(got[1::4]):
            within(f"pipelined ttl {n}", 1, 100, t)
        for n, t in enumerate(got[3::4]):
            within(f"pipelined pttl {n}", 1, 100_000, t)
        r.close()


async def expiry_async(port):
    for proto in (2, 3):
        r = redis.asyncio.Redis(host=HOST, port=port, protocol=proto)
        eq("async set ex", True, await r.set("pyd:as:ex", "v", ex=60))
        within("async ttl", 1, 60, await r.ttl("pyd:as:ex"))
        eq("async expire", True, await r.expire("pyd:as:ex", 90))
        within("async ttl after expire", 1, 90, await r.ttl("pyd:as:ex"))
        eq("async getex persist", b"v", await r.getex("pyd:as:ex", persist=True))
        eq("async ttl after persist", -1, await r.ttl("pyd:as:ex"))
        await r.aclose()


def multi(port):
    for r in clients(port):
        r.delete("pyd:tx:n")
        p = r.pipeline()  # transaction=True: MULTI ... EXEC
        p.set("pyd:tx:ex", "a", ex=100)
        p.set("pyd:tx:px", "b", px=100_000)
        p.incr("pyd:tx:n")
        p.incrby("pyd:tx:n", 4)
        p.ttl("pyd:tx:ex")
        p.pttl("pyd:tx:px")
        p.mget("pyd:tx:ex", "pyd:tx:px")
        got = p.execute()
        eq("transaction reply count", 7, len(got))
        eq("transaction SET/SET/INCR/INCRBY", [True, True, 1, 5], got[:4])
        within("ttl in a transaction", 1, 100, got[4])
        within("pttl in a transaction", 1, 100_000, got[5])
        eq("mget in a transaction", [b"a", b"b"], got[6])
        eq("counter after EXEC", b"5", r.get("pyd:tx:n"))

        # A command the server refuses while queueing aborts the whole transaction.
        p = r.pipeline()
        p.set("pyd:tx:n", "aborted")
        p.execute_command("NOSUCHCMD")
        try:
            p.execute()
            raise AssertionError("a transaction with an unknown command ran")
        except redis.ResponseError as e:
            if "EXECABORT" not in str(e) and "unknown command" not in str(e):
                raise
        eq("counter after EXECABORT", b"5", r.get("pyd:tx:n"))

        # transaction() with WATCH: the optimistic-locking loop redis-py users write.
        def add_ten(pipe):
            current = int(pipe.get("pyd:tx:n"))
            pipe.multi()
            pipe.set("pyd:tx:n", current + 10)

        eq("transaction() with WATCH", [True], r.transaction(add_ten, "pyd:tx:n"))
        eq("counter after transaction()", b"15", r.get("pyd:tx:n"))

        # A watched key that another client changes makes EXEC answer nil (WatchError).
        other = redis.Redis(host=HOST, port=port)
        with r.pipeline() as pipe:
            pipe.watch("pyd:tx:n")
            other.set("pyd:tx:n", "changed")
            pipe.multi()
            pipe.set("pyd:tx:n", "lost")
            try:
                pipe.execute()
                raise AssertionError("EXEC ran although a watched key changed")
            except redis.WatchError:
                pass
        eq("watched key after the aborted EXEC", b"changed", r.get("pyd:tx:n"))
        other.close()
        r.close()


def main():
    port = int(sys.argv[1])
    parts = sys.argv[2:] or ["plain"]
    for part in parts:
        if part == "plain":
            resp3(port)
            plain_pipeline(port)
            asyncio.run(plain_async(port))
        elif part == "expiry":
            expiry(port)
            asyncio.run(expiry_async(port))
        elif part == "multi":
            multi(port)
        else:
            raise SystemExit(f"unknown part {part!r}")
        print(f"redis-py {part} ok")
    print("redis-py depth ok")


if __name__ == "__main__":
    main()
