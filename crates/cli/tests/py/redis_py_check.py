"""redis-py against a running directkv: the commands a Python user reaches for first."""
import sys

import redis

port = int(sys.argv[1])
for proto in (2, 3):
    r = redis.Redis(host="127.0.0.1", port=port, protocol=proto)
    assert r.ping() is True
    assert r.flushall() is True
    assert r.set("py:k", "v") is True
    assert r.get("py:k") == b"v"
    assert r.set("py:k", "w", nx=True) is None
    assert r.getset("py:k", "x") == b"v"
    assert r.incr("py:n") == 1
    assert r.incrby("py:n", 2) == 3
    assert r.mset({"py:a": "1", "py:b": "2"}) is True
    assert r.mget("py:a", "py:b", "py:none") == [b"1", b"2", None]
    assert r.delete("py:a", "py:b") == 2
    assert r.exists("py:k") == 1
    assert r.append("py:s", "ab") == 2
    assert r.strlen("py:s") == 2
    assert abs(r.incrbyfloat("py:f", 1.5) - 1.5) < 1e-9
    assert r.dbsize() >= 4
    assert r.execute_command("DKV.VSET", "py:v", "u32", 1, 2, 3) in (b"OK", "OK", True)
    assert [int(x) for x in r.execute_command("DKV.VGET", "py:v", "u32")] == [1, 2, 3]
    p = r.pipeline(transaction=False)
    for i in range(100):
        p.set(f"py:p{i}", i)
    p.get("py:p99")
    assert p.execute()[-1] == b"99"
    try:
        r.execute_command("NOSUCHCMD")
        raise AssertionError("unknown command accepted")
    except redis.ResponseError as e:
        assert "unknown command" in str(e)
print("redis-py ok")
