//! Issue 19 item 13: INFO honours its section arguments as Redis 7 does and carries the fields
//! Redis tools read (`redis-cli --stat` prints no negative numbers); /metrics has
//! `rejected_connections`; silent sockets on the metrics port do not delay a scrape.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use directkv_proto::resp::Reply;
use directkv_testkit::peer::require_program;
use directkv_testkit::server::{self, metric, Client};

fn info(c: &mut Client, args: &[&str]) -> String {
    let mut a = vec!["INFO"];
    a.extend_from_slice(args);
    match c.cmd(&a) {
        Reply::Bulk(Some(t)) => String::from_utf8(t).unwrap(),
        r => panic!("INFO {args:?}: {r:?}"),
    }
}

/// The `# Name` headers of an INFO reply, in order.
fn sections(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# "))
        .map(|s| s.to_ascii_lowercase())
        .collect()
}

fn field<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

#[test]
fn info_honours_its_section_arguments() {
    let srv = server::start(2);
    let mut c = Client::connect(&srv);
    let default = sections(&info(&mut c, &[]));
    assert!(default.contains(&"server".to_string()), "{default:?}");
    assert!(default.contains(&"keyspace".to_string()), "{default:?}");
    assert_eq!(sections(&info(&mut c, &["default"])), default);
    let all = sections(&info(&mut c, &["all"]));
    assert!(all.len() >= default.len(), "{all:?}");
    assert_eq!(sections(&info(&mut c, &["everything"])), all);
    assert_eq!(sections(&info(&mut c, &["server"])), ["server"]);
    assert_eq!(sections(&info(&mut c, &["SeRvEr"])), ["server"]);
    assert_eq!(
        sections(&info(&mut c, &["clients", "MEMORY"])),
        ["clients", "memory"]
    );
    assert_eq!(info(&mut c, &["nosuchsection"]), "");
    // An unknown section next to a known one only adds nothing.
    assert_eq!(
        sections(&info(&mut c, &["stats", "nosuchsection"])),
        ["stats"]
    );
    drop(c);
    srv.stop();
}

#[test]
fn info_has_the_fields_redis_tools_read() {
    let srv = server::start(2);
    let mut c = Client::connect(&srv);
    assert_eq!(c.cmd(&["SET", "k", "v"]), server::ok());
    let text = info(&mut c, &[]);
    for name in [
        "used_memory",
        "used_memory_rss",
        "maxmemory",
        "connected_clients",
        "blocked_clients",
        "connected_slaves",
        "total_commands_processed",
        "total_connections_received",
        "instantaneous_ops_per_sec",
    ] {
        let v = field(&text, name).unwrap_or_else(|| panic!("INFO lacks {name}:\n{text}"));
        let n: u64 = v.parse().unwrap_or_else(|_| panic!("{name}:{v}"));
        if name == "used_memory" || name == "maxmemory" || name == "connected_clients" {
            assert!(n > 0, "{name}:{n}");
        }
    }
    assert_eq!(field(&text, "role"), Some("master"));
    assert_eq!(field(&text, "connected_slaves"), Some("0"));
    assert_eq!(field(&text, "blocked_clients"), Some("0"));
    assert!(field(&text, "used_memory_human").is_some(), "{text}");
    let ratio: f64 = field(&text, "mem_fragmentation_ratio")
        .expect("mem_fragmentation_ratio")
        .parse()
        .unwrap();
    assert!(ratio > 0.0, "{ratio}");
    drop(c);
    srv.stop();
}

#[test]
fn redis_cli_stat_prints_no_negative_numbers() {
    let Some(cli) = require_program("redis-cli", "redis-tools") else {
        return;
    };
    let srv = server::start(2);
    let mut c = Client::connect(&srv);
    assert_eq!(c.cmd(&["SET", "k", "v"]), server::ok());
    let mut child = Command::new(cli)
        .args(["-h", "127.0.0.1", "-p", &srv.addr().port().to_string()])
        .args(["--stat", "-i", "0.1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-cli starts");
    // Read the header and two data lines on a thread, so a stuck redis-cli cannot hang the test.
    let out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(out).lines();
        let mut got = Vec::new();
        for _ in 0..4 {
            match lines.next() {
                Some(Ok(l)) => got.push(l),
                _ => break,
            }
        }
        let _ = tx.send(got);
    });
    let got = rx.recv_timeout(Duration::from_secs(10));
    let _ = child.kill();
    let _ = child.wait();
    let got = got.expect("redis-cli --stat printed 4 lines within 10 s");
    let text = got.join("\n");
    assert!(text.contains("keys"), "{text}");
    // A data line: keys, memory, clients, blocked, requests, connections.
    // Line 0 is a banner of dashes, line 1 the column names.
    for data in &got[2..] {
        assert!(!data.contains('-'), "a negative number:\n{text}");
    }
    let first = got[2].split_whitespace().next().unwrap_or("");
    assert_eq!(first, "1", "keys column:\n{text}");
    drop(c);
    srv.stop();
}

#[test]
fn rejected_connections_is_in_info_and_in_metrics() {
    let mut cfg = server::config(1);
    cfg.connections_max = 1;
    let srv = server::start_with(cfg);
    let mut first = Client::connect(&srv);
    assert_eq!(first.cmd(&["PING"]), Reply::Simple("PONG".into()));
    // The second connection is refused: the server closes it (a reset or an end of stream).
    let second = Client::connect(&srv);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let page = server::metrics(&srv);
        if metric(&page, "directkv_rejected_connections_total", "") >= 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "/metrics never counted it:\n{page}"
        );
        std::thread::yield_now();
    }
    drop(second);
    let text = info(&mut first, &["clients"]);
    let n: u64 = field(&text, "rejected_connections")
        .unwrap()
        .parse()
        .unwrap();
    assert!(n >= 1, "{text}");
    drop(first);
    srv.stop();
}

#[test]
fn silent_sockets_do_not_delay_a_scrape() {
    let srv = server::start(1);
    let addr = srv.metrics_addr().unwrap();
    let silent: Vec<TcpStream> = (0..5).map(|_| TcpStream::connect(addr).unwrap()).collect();
    let t = Instant::now();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut page = String::new();
    s.read_to_string(&mut page).unwrap();
    let took = t.elapsed();
    assert!(page.starts_with("HTTP/1.1 200 OK"), "{page}");
    assert!(page.contains("directkv_connections "), "{page}");
    assert!(
        took < Duration::from_millis(1500),
        "the scrape waited {took:?} behind 5 silent sockets"
    );
    drop(silent);
    srv.stop();
}
