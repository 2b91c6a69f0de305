"""redis-py's admin helpers against a running directkv (issue 20 item 3): CLIENT, CONFIG and
COMMAND as redis-py parses them."""
import sys

import redis

port = int(sys.argv[1])
for proto in (2, 3):
    r = redis.Redis(host="127.0.0.1", port=port, protocol=proto)
    assert r.client_setname("py-admin") is True
    assert r.client_getname() in (b"py-admin", "py-admin")
    me = r.client_id()
    clients = r.client_list()
    mine = [c for c in clients if int(c["id"]) == me]
    assert len(mine) == 1, clients
    assert mine[0]["name"] == "py-admin", mine
    assert mine[0]["cmd"] == "client|list", mine
    assert r.client_info()["id"] == me
    cfg = r.config_get("*")
    assert cfg["maxclients"] == "10000" or cfg[b"maxclients"] == b"10000", cfg
    assert "maxmemory" in cfg or b"maxmemory" in cfg
    assert r.config_get("maxmemory-*")
    assert r.config_set("timeout", 0) is True
    count = r.command_count()
    assert count >= 40, count
    assert r.command_list() and len(r.command_list()) == count
    assert r.command_getkeys("MSET", "a", "1", "b", "2") in ([b"a", b"b"], ["a", "b"])
    info = r.command()
    assert info["get"]["arity"] == 2, info.get("get")
    assert info["mset"]["step_count"] == 2, info.get("mset")
    other = redis.Redis(host="127.0.0.1", port=port, protocol=proto)
    other_id = other.client_id()
    assert r.client_kill_filter(_id=other_id) == 1
    # (redis-py reconnects by itself, so the killed id's absence is what shows the kill.)
    assert all(int(c["id"]) != other_id for c in r.client_list())
    assert r.time()[0] > 1_600_000_000
print("redis-py admin ok")
