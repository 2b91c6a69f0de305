//! memcached's text protocol on the memcached port, over real sockets (issue 21): every
//! command and its replies (as memcached 1.6.18 answers them), pipelining, noreply, multi-get
//! across shards, CAS flows, exptimes, and keys shared with RESP.

use std::time::{Duration, Instant};

use crate::common::{self, bulk, ok, Client};
use crate::memcache_client::{unix_now, Mc};
use directkv_proto::resp::Reply;
use directkv_server::ServerConfig;

const DEADLINE: Duration = Duration::from_secs(20);

#[test]
fn storage_commands_and_their_replies() {
    let srv = common::start(2);
    let mut c = Mc::connect(&srv);
    c.expect("set a 5 0 2\r\nhi\r\n", &["STORED"]);
    c.expect("get a\r\n", &["VALUE a 5 2", "hi", "END"]);
    c.expect("add a 0 0 1\r\nx\r\n", &["NOT_STORED"]);
    c.expect("add b 7 0 1\r\nx\r\n", &["STORED"]);
    c.expect("replace zz 0 0 1\r\nx\r\n", &["NOT_STORED"]);
    c.expect("replace b 8 0 2\r\nyy\r\n", &["STORED"]);
    c.expect("append a 9 0 3\r\n!!!\r\n", &["STORED"]);
    c.expect("prepend a 9 0 2\r\n<<\r\n", &["STORED"]);
    // Append and prepend keep the item's flags.
    c.expect(
        "get a b\r\n",
        &["VALUE a 5 7", "<<hi!!!", "VALUE b 8 2", "yy", "END"],
    );
    c.expect("append nope 0 0 1\r\nx\r\n", &["NOT_STORED"]);
    c.expect("prepend nope 0 0 1\r\nx\r\n", &["NOT_STORED"]);
    c.expect("get nope\r\n", &["END"]);
    c.expect("delete a\r\n", &["DELETED"]);
    c.expect("delete a\r\n", &["NOT_FOUND"]);
    c.expect("delete b 0\r\n", &["DELETED"]);
    c.expect("touch nope 10\r\n", &["NOT_FOUND"]);
    c.expect(
        "set t 1 0 1\r\nx\r\ntouch t 100\r\n",
        &["STORED", "TOUCHED"],
    );
    c.expect("version\r\n", &["VERSION 1.6.18"]);
    c.expect("verbosity 1\r\n", &["OK"]);
    c.expect("verbosity 1 noreply\r\nmn\r\n", &["MN"]);
    // Flags are 32 bits.
    c.expect(
        "set f 4294967295 0 1\r\nx\r\nget f\r\n",
        &["STORED", "VALUE f 4294967295 1", "x", "END"],
    );
    c.expect("flush_all\r\n", &["OK"]);
    c.expect("get t f\r\n", &["END"]);
    srv.stop();
}

#[test]
fn incr_and_decr_follow_memcacheds_rules() {
    let srv = common::start(1);
    let mut c = Mc::connect(&srv);
    c.expect("incr n 1\r\n", &["NOT_FOUND"]);
    c.expect("set n 3 0 2\r\n10\r\n", &["STORED"]);
    c.expect("incr n 5\r\n", &["15"]);
    c.expect("decr n 100\r\n", &["0"]);
    c.expect("set n 3 0 2\r\n10\r\ndecr n 1\r\n", &["STORED", "9"]);
    // memcached pads a shorter result in place with spaces; flags are kept.
    c.expect("get n\r\n", &["VALUE n 3 2", "9 ", "END"]);
    c.expect("set w 0 0 20\r\n18446744073709551615\r\n", &["STORED"]);
    c.expect("incr w 2\r\n", &["1"]);
    c.expect("set s 0 0 2\r\nab\r\n", &["STORED"]);
    c.expect(
        "incr s 1\r\n",
        &["CLIENT_ERROR cannot increment or decrement non-numeric value"],
    );
    c.expect(
        "incr n x\r\n",
        &["CLIENT_ERROR invalid numeric delta argument"],
    );
    c.expect(
        "incr n 1 noreply\r\nget n\r\n",
        &["VALUE n 3 2", "10", "END"],
    );
    srv.stop();
}

#[test]
fn cas_flows() {
    let srv = common::start(2);
    let mut c = Mc::connect(&srv);
    let mut r = Client::connect(&srv);
    c.expect("set k 0 0 1\r\na\r\n", &["STORED"]);
    let unique = gets_unique(&mut c, "k");
    c.expect(&format!("cas k 0 0 1 {unique}\r\nb\r\n"), &["STORED"]);
    // The store changed the CAS: the old unique no longer matches.
    c.expect(&format!("cas k 0 0 1 {unique}\r\nc\r\n"), &["EXISTS"]);
    let unique = gets_unique(&mut c, "k");
    c.expect("append k 0 0 1\r\n+\r\n", &["STORED"]);
    c.expect(&format!("cas k 0 0 1 {unique}\r\nd\r\n"), &["EXISTS"]);
    // A RESP write in between changes it too.
    let unique = gets_unique(&mut c, "k");
    assert_eq!(r.cmd(&["SET", "k", "resp"]), ok());
    c.expect(&format!("cas k 0 0 1 {unique}\r\ne\r\n"), &["EXISTS"]);
    // gets gives a key written over RESP a CAS unique that a cas can use.
    let unique = gets_unique(&mut c, "k");
    c.expect(&format!("cas k 0 0 1 {unique}\r\nf\r\n"), &["STORED"]);
    assert_eq!(r.cmd(&["GET", "k"]), bulk("f"));
    // touch and gat keep the CAS, as in memcached.
    let unique = gets_unique(&mut c, "k");
    c.expect("touch k 100\r\n", &["TOUCHED"]);
    c.send(b"gat 200 k\r\n");
    c.line();
    c.line();
    c.line();
    c.expect(&format!("cas k 0 0 1 {unique}\r\ng\r\n"), &["STORED"]);
    c.expect("cas missing 0 0 1 5\r\nx\r\n", &["NOT_FOUND"]);
    c.expect("cas k 0 0 1 0\r\nx\r\n", &["EXISTS"]);
    c.expect("cas k 0 0 1 1 noreply\r\nx\r\nmn\r\n", &["MN"]);
    srv.stop();
}

/// The CAS unique `gets` gives `key`.
fn gets_unique(c: &mut Mc, key: &str) -> u64 {
    c.send(format!("gets {key}\r\n").as_bytes());
    let header = c.line();
    let words: Vec<&str> = header.split(' ').collect();
    assert_eq!((words[0], words.len()), ("VALUE", 5), "{header}");
    let len: usize = words[3].parse().unwrap();
    c.block(len);
    assert_eq!(c.line(), "END");
    let unique: u64 = words[4].parse().unwrap();
    assert_ne!(unique, 0);
    unique
}

#[test]
fn gets_gat_and_gats_return_memcacheds_lines() {
    let srv = common::start(2);
    let mut c = Mc::connect(&srv);
    c.expect(
        "set a 1 0 1\r\nx\r\nset b 2 0 1\r\ny\r\n",
        &["STORED", "STORED"],
    );
    let ua = gets_unique(&mut c, "a");
    let ub = gets_unique(&mut c, "b");
    c.expect(
        "gets a nope b\r\n",
        &[
            &format!("VALUE a 1 1 {ua}"),
            "x",
            &format!("VALUE b 2 1 {ub}"),
            "y",
            "END",
        ],
    );
    c.expect("gat 100 a nope\r\n", &["VALUE a 1 1", "x", "END"]);
    c.expect("gats 0 b\r\n", &[&format!("VALUE b 2 1 {ub}"), "y", "END"]);
    // gat with a negative exptime returns the item and expires it.
    c.expect("gat -1 a\r\n", &["VALUE a 1 1", "x", "END"]);
    c.expect("get a\r\n", &["END"]);
    srv.stop();
}

#[test]
fn pipelined_requests_and_noreply_are_answered_in_order() {
    let srv = common::start(2);
    let mut c = Mc::connect(&srv);
    let mut batch = String::new();
    for i in 0..500 {
        batch.push_str(&format!(
            "set k{i} {i} 0 {}\r\nv{i}\r\n",
            format!("v{i}").len()
        ));
        batch.push_str(&format!("set q{i} 0 0 1 noreply\r\nq\r\n"));
        batch.push_str(&format!("get k{i}\r\n"));
        batch.push_str(&format!(
            "delete q{i} noreply\r\nincr nope{i} 1 noreply\r\n"
        ));
    }
    c.send(batch.as_bytes());
    for i in 0..500 {
        assert_eq!(c.line(), "STORED");
        assert_eq!(
            c.line(),
            format!("VALUE k{i} {i} {}", format!("v{i}").len())
        );
        assert_eq!(c.line(), format!("v{i}"));
        assert_eq!(c.line(), "END");
    }
    c.sync();
    c.expect("get q0 q499\r\n", &["END"]);
    srv.stop();
}

#[test]
fn a_multi_get_across_shards_answers_every_key_in_order() {
    let srv = common::start(2);
    let mut c = Mc::connect(&srv);
    let mut batch = String::new();
    for i in 0..200 {
        batch.push_str(&format!(
            "set key:{i} {i} 0 {}\r\n{i}\r\n",
            i.to_string().len()
        ));
    }
    c.send(batch.as_bytes());
    for _ in 0..200 {
        assert_eq!(c.line(), "STORED");
    }
    let keys: Vec<String> = (0..200).rev().map(|i| format!("key:{i}")).collect();
    c.send(format!("get {} missing\r\n", keys.join(" ")).as_bytes());
    for i in (0..200).rev() {
        assert_eq!(
            c.line(),
            format!("VALUE key:{i} {i} {}", i.to_string().len())
        );
        assert_eq!(c.line(), i.to_string());
    }
    assert_eq!(c.line(), "END");
    srv.stop();
}

#[test]
fn keys_are_shared_with_resp_both_ways_with_the_same_deadline() {
    let srv = common::start(2);
    let mut c = Mc::connect(&srv);
    let mut r = Client::connect(&srv);
    assert_eq!(r.cmd(&["SET", "from-resp", "hello"]), ok());
    c.expect(
        "get from-resp\r\n",
        &["VALUE from-resp 0 5", "hello", "END"],
    );
    c.expect("set from-mc 42 0 3\r\nabc\r\n", &["STORED"]);
    assert_eq!(r.cmd(&["GET", "from-mc"]), bulk("abc"));
    // A relative exptime and an absolute one are the deadline RESP's TTL shows.
    c.expect("set rel 0 1000 1\r\nx\r\n", &["STORED"]);
    let ttl = int(r.cmd(&["TTL", "rel"]));
    assert!((998..=1000).contains(&ttl), "TTL {ttl}");
    let at = unix_now() + 5000;
    c.expect(&format!("set abs 0 {at} 1\r\nx\r\n"), &["STORED"]);
    assert_eq!(int(r.cmd(&["EXPIRETIME", "abs"])), at as i64);
    c.expect(&format!("touch from-resp {at}\r\n"), &["TOUCHED"]);
    assert_eq!(int(r.cmd(&["EXPIRETIME", "from-resp"])), at as i64);
    // A RESP write drops the memcached flags, as it replaces the item.
    assert_eq!(r.cmd(&["SET", "from-mc", "new"]), ok());
    c.expect("get from-mc\r\n", &["VALUE from-mc 0 3", "new", "END"]);
    // RESP's INCR reads memcached's numbers.
    c.expect("set num 0 0 2\r\n41\r\n", &["STORED"]);
    assert_eq!(r.cmd(&["INCR", "num"]), Reply::Integer(42));
    c.expect("incr num 1\r\n", &["43"]);
    srv.stop();
}

fn int(r: Reply) -> i64 {
    match r {
        Reply::Integer(n) => n,
        r => panic!("not an integer: {r:?}"),
    }
}

#[test]
fn exptimes_past_now_and_negative_expire_at_once_and_short_ones_expire() {
    let srv = common::start(1);
    let mut c = Mc::connect(&srv);
    c.expect("set neg 0 -1 1\r\nx\r\nget neg\r\n", &["STORED", "END"]);
    let past = unix_now() - 10;
    c.expect(
        &format!("set past 0 {past} 1\r\nx\r\nget past\r\n"),
        &["STORED", "END"],
    );
    c.expect(
        "set t 0 0 1\r\nx\r\ntouch t -1\r\nget t\r\n",
        &["STORED", "TOUCHED", "END"],
    );
    // One second: gone within the deadline (polled, no fixed sleep).
    c.expect("set short 0 1 1\r\nx\r\n", &["STORED"]);
    let start = Instant::now();
    loop {
        c.send(b"get short\r\n");
        if c.line() == "END" {
            break;
        }
        c.line();
        c.line();
        assert!(
            start.elapsed() < DEADLINE,
            "an exptime of 1 s never expired"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    srv.stop();
}

#[test]
fn flush_all_with_a_delay_flushes_when_the_time_comes() {
    let srv = common::start(2);
    let mut c = Mc::connect(&srv);
    c.expect("set a 0 0 1\r\nx\r\nflush_all 1\r\n", &["STORED", "OK"]);
    let start = Instant::now();
    loop {
        c.send(b"get a\r\n");
        if c.line() == "END" {
            break;
        }
        c.line();
        c.line();
        assert!(start.elapsed() < DEADLINE, "flush_all 1 never flushed");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        start.elapsed() >= Duration::from_millis(500),
        "flushed before its time"
    );
    // A later flush_all replaces a pending one: `flush_all 0` now, then nothing later.
    c.expect("flush_all 1000 noreply\r\nflush_all 0\r\n", &["OK"]);
    c.expect(
        "set b 0 0 1\r\nx\r\nget b\r\n",
        &["STORED", "VALUE b 0 1", "x", "END"],
    );
    srv.stop();
}

#[test]
fn error_lines_are_memcacheds_and_the_connection_stays_usable() {
    let srv = common::start(1);
    let mut c = Mc::connect(&srv);
    c.expect("bogus\r\n", &["ERROR"]);
    c.expect("get\r\n", &["ERROR"]);
    c.expect("set k x 0 1\r\n", &["CLIENT_ERROR bad command line format"]);
    // As memcached: the block's 3 bytes are read, and the "\r\n" after them is a line.
    c.expect(
        "set k 0 0 1\r\nxyz\r\n",
        &["CLIENT_ERROR bad data chunk", "ERROR"],
    );
    c.sync();
    c.expect("touch k x\r\n", &["CLIENT_ERROR invalid exptime argument"]);
    c.expect(
        "delete k 5\r\n",
        &["CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]"],
    );
    let long_key = "k".repeat(251);
    c.expect(
        &format!("get {long_key}\r\n"),
        &["CLIENT_ERROR bad command line format"],
    );
    c.expect(
        "set k 0 0 1\r\nx\r\nget k\r\n",
        &["STORED", "VALUE k 0 1", "x", "END"],
    );
    srv.stop();
}

#[test]
fn stats_answers_memcacheds_fields() {
    let srv = common::start(2);
    let mut c = Mc::connect(&srv);
    c.expect(
        "set a 0 0 1\r\nx\r\nget a b\r\n",
        &["STORED", "VALUE a 0 1", "x", "END"],
    );
    assert_eq!(c.stat("pid"), std::process::id().to_string());
    assert_eq!(c.stat("version"), "1.6.18");
    assert_eq!(c.stat("threads"), "2");
    assert_eq!(c.stat("curr_items"), "1");
    assert_eq!(c.stat("cmd_get"), "2");
    assert_eq!(c.stat("get_hits"), "1");
    assert_eq!(c.stat("get_misses"), "1");
    assert_eq!(c.stat("cmd_set"), "1");
    assert_eq!(c.stat("limit_maxbytes"), (32u64 << 20).to_string());
    let time: u64 = c.stat("time").parse().unwrap();
    assert!(time.abs_diff(unix_now()) <= 2);
    for name in [
        "uptime",
        "curr_connections",
        "total_connections",
        "bytes",
        "evictions",
    ] {
        c.stat(name);
    }
    c.expect("stats items\r\n", &["END"]);
    c.expect(
        "stats slabs\r\n",
        &["STAT active_slabs 0", "STAT total_malloced 0", "END"],
    );
    c.send(b"stats settings\r\n");
    let mut settings = Vec::new();
    loop {
        let line = c.line();
        if line == "END" {
            break;
        }
        settings.push(line);
    }
    assert!(
        settings.contains(&"STAT cas_enabled 1".to_string()),
        "{settings:?}"
    );
    c.expect("stats nonsense\r\n", &["ERROR"]);
    // The same counters are rows of INFO.
    let mut r = Client::connect(&srv);
    assert_eq!(common::info_field(&mut r, "memcache_get_hits"), 1);
    srv.stop();
}

#[test]
fn memcached_clients_appear_in_client_list_and_can_be_killed() {
    let srv = common::start(1);
    let mut c = Mc::connect(&srv);
    c.expect("version\r\n", &["VERSION 1.6.18"]);
    let mut r = Client::connect(&srv);
    let list = match r.cmd(&["CLIENT", "LIST"]) {
        Reply::Bulk(Some(t)) => String::from_utf8(t).unwrap(),
        other => panic!("{other:?}"),
    };
    let port = c.s.local_addr().unwrap().port();
    let line = list
        .lines()
        .find(|l| l.contains(&format!(":{port} ")))
        .unwrap_or_else(|| panic!("no line for the memcached client: {list}"));
    assert!(line.contains("cmd=version"), "{line}");
    let id = line.split(' ').next().unwrap().trim_start_matches("id=");
    assert_eq!(r.cmd(&["CLIENT", "KILL", "ID", id]), Reply::Integer(1));
    assert!(c.closed());
    srv.stop();
}

#[test]
fn quit_closes_after_the_replies_before_it() {
    let srv = common::start(1);
    let mut c = Mc::connect(&srv);
    c.send(b"set a 0 0 1\r\nx\r\nquit\r\nget a\r\n");
    assert_eq!(c.line(), "STORED");
    assert!(c.closed());
    srv.stop();
}

#[test]
fn the_port_is_ephemeral_in_tests_off_at_zero_and_a_taken_port_names_the_flag() {
    let srv = common::start(1);
    let addr = srv.memcache_addr().unwrap();
    assert_ne!(addr.port(), 11211);
    let off = common::start_with(ServerConfig {
        memcache_port: 0,
        ..common::config(1)
    });
    assert_eq!(off.memcache_addr(), None);
    let err = match directkv_server::Server::start(ServerConfig {
        memcache_port: addr.port(),
        metrics_port: Some(0),
        ..common::config(1)
    }) {
        Err(e) => e,
        Ok(_) => panic!("a second server bound a taken memcached port"),
    };
    assert!(err.contains("--memcache-port"), "{err}");
    off.stop();
    srv.stop();
}

/// MEMORY USAGE counts the flags and CAS memcached's writes keep with an item, and reads
/// them without writing (a WATCH on the key still lets the transaction through).
#[test]
fn memory_usage_counts_an_items_flags_and_cas_and_is_a_read() {
    let srv = common::start(2);
    let mut c = Mc::connect(&srv);
    let mut r = Client::connect(&srv);
    c.expect("set mckey 5 0 8\r\n12345678\r\n", &["STORED"]);
    assert_eq!(r.cmd(&["SET", "rskey", "12345678"]), ok());
    let usage = |r: &mut Client, k: &str| int(r.cmd(&["MEMORY", "USAGE", k]));
    let (with_meta, without) = (usage(&mut r, "mckey"), usage(&mut r, "rskey"));
    assert!(with_meta > without, "{with_meta} vs {without}");
    assert_eq!(r.cmd(&["WATCH", "mckey"]), ok());
    usage(&mut r, "mckey");
    assert_eq!(r.cmd(&["MULTI"]), ok());
    r.cmd(&["SET", "other", "1"]);
    assert!(
        matches!(r.cmd(&["EXEC"]), Reply::Array(Some(ref a)) if a.len() == 1),
        "EXEC after MEMORY USAGE of a watched key"
    );
    // A RESP write drops the meta: the same bytes as the RESP key.
    assert_eq!(r.cmd(&["SET", "mckey", "12345678"]), ok());
    assert_eq!(usage(&mut r, "mckey"), without);
    srv.stop();
}

/// `stats reset` zeroes what memcached 1.6.18 zeroes: the same commands on a real memcached
/// and on directkv, then the counts each shows after a reset (zero or not) must agree; INFO
/// keeps directkv's totals.
#[test]
fn stats_reset_zeroes_what_memcached_zeroes() {
    let Some(memcached) = crate::memcache_differential::start_memcached() else {
        return;
    };
    let srv = common::start(2);
    let script: &[(&str, &[&str])] = &[
        ("set a 0 0 1\r\n1\r\n", &["STORED"]),
        ("get a\r\n", &["VALUE a 0 1", "1", "END"]),
        ("get zz\r\n", &["END"]),
        ("incr a 1\r\n", &["2"]),
        ("decr zz 1\r\n", &["NOT_FOUND"]),
        ("touch a 0\r\n", &["TOUCHED"]),
        ("delete b\r\n", &["NOT_FOUND"]),
        ("cas a 0 0 1 999\r\nx\r\n", &["EXISTS"]),
        ("mg a v\r\n", &["VA 1", "2"]),
        ("set gone 0 -1 1\r\nx\r\n", &["STORED"]),
    ];
    let fields = [
        "cmd_get",
        "cmd_set",
        "cmd_touch",
        "cmd_meta",
        "get_hits",
        "get_misses",
        "delete_misses",
        "incr_hits",
        "decr_misses",
        "cas_badval",
        "touch_hits",
        "total_items",
        "total_connections",
        "curr_items",
        "curr_connections",
        "evictions",
    ];
    let mut zeroed = Vec::new();
    for mut c in [Mc::connect_to(memcached.addr), Mc::connect(&srv)] {
        for (request, lines) in script {
            c.expect(request, lines);
        }
        let before = c.stats();
        c.expect("stats reset\r\n", &["RESET"]);
        let after = c.stats();
        let z: Vec<(&str, bool, bool)> = fields
            .iter()
            .map(|&f| (f, before[f] != "0", after[f] == "0"))
            .collect();
        zeroed.push(z);
    }
    assert_eq!(zeroed[0], zeroed[1], "memcached, then directkv");
    let mut r = Client::connect(&srv);
    let info = match r.cmd(&["INFO", "stats"]) {
        Reply::Bulk(Some(b)) => String::from_utf8(b).unwrap(),
        other => panic!("{other:?}"),
    };
    assert!(info.contains("memcache_cmd_get:3"), "{info}");
    drop(memcached);
    srv.stop();
}

/// A memcached `get` only reads: a RESP WATCH on the key lets the transaction through (it was
/// counted as a write once, as the op kind may give the item a CAS); `gat`, which changes the
/// deadline, is a write and aborts it.
#[test]
fn a_plain_get_does_not_touch_a_watched_key_and_gat_does() {
    let srv = common::start(2);
    let mut c = Mc::connect(&srv);
    let mut r = Client::connect(&srv);
    c.expect("set wk 0 0 1\r\nx\r\n", &["STORED"]);
    assert_eq!(r.cmd(&["WATCH", "wk"]), ok());
    c.expect("get wk\r\n", &["VALUE wk 0 1", "x", "END"]);
    assert_eq!(r.cmd(&["MULTI"]), ok());
    assert_eq!(
        r.cmd(&["SET", "other", "1"]),
        Reply::Simple("QUEUED".into())
    );
    assert_eq!(r.cmd(&["EXEC"]), Reply::Array(Some(vec![ok()])));
    assert_eq!(r.cmd(&["WATCH", "wk"]), ok());
    c.expect("gat 100 wk\r\n", &["VALUE wk 0 1", "x", "END"]);
    assert_eq!(r.cmd(&["MULTI"]), ok());
    assert_eq!(
        r.cmd(&["SET", "other", "2"]),
        Reply::Simple("QUEUED".into())
    );
    assert_eq!(r.cmd(&["EXEC"]), Reply::Array(None));
    srv.stop();
}
