//! Hostile use of the admin commands (issue 20 item 3): without the password nothing admin
//! runs (SHUTDOWN, CONFIG, CLIENT KILL); a live password cannot be set while datagrams are
//! served unauthenticated; bad patterns and arguments get errors and the server stays usable.

use crate::common;
use common::{config, ok, start_with, Client};
use directkv_proto::resp::Reply;
use directkv_server::ServerConfig;

fn noauth() -> Reply {
    Reply::Error("NOAUTH Authentication required.".into())
}

#[test]
fn without_the_password_no_admin_command_runs() {
    let srv = start_with(ServerConfig {
        requirepass: Some("pw".into()),
        ..config(1)
    });
    let mut stranger = Client::connect(&srv);
    for cmd in [
        &["SHUTDOWN", "NOSAVE"][..],
        &["CONFIG", "SET", "requirepass", "mine"],
        &["CONFIG", "GET", "requirepass"],
        &["CLIENT", "KILL", "SKIPME", "no"],
        &["CLIENT", "LIST"],
    ] {
        assert_eq!(stranger.cmd(cmd), noauth(), "{cmd:?}");
    }
    assert!(!srv.shutdown_requested());
    let mut admin = Client::connect(&srv);
    assert_eq!(admin.cmd(&["AUTH", "pw"]), ok());
    assert_eq!(admin.cmd(&["PING"]), Reply::Simple("PONG".into()));
    srv.stop();
}

#[test]
fn a_live_password_is_refused_while_datagrams_are_unauthenticated() {
    // The tests' default config serves native UDP and OCSM on loopback without a password.
    let srv = start_with(config(1));
    let mut c = Client::connect(&srv);
    match c.cmd(&["CONFIG", "SET", "requirepass", "pw"]) {
        Reply::Error(e) => assert!(
            e.starts_with("ERR CONFIG SET failed (possibly related to argument 'requirepass')")
                && e.contains("UDP"),
            "{e}"
        ),
        r => panic!("{r:?}"),
    }
    assert_eq!(c.cmd(&["SET", "k", "v"]), ok());
    srv.stop();
}

#[test]
fn hostile_patterns_and_arguments_get_answers() {
    let srv = start_with(config(1));
    let mut c = Client::connect(&srv);
    // A pattern that would be exponential for a naive backtracking matcher.
    let pattern = format!("{}b", "*a".repeat(2000));
    assert_eq!(
        c.cmd(&["CONFIG", "GET", &pattern]),
        Reply::Array(Some(vec![]))
    );
    let evil = format!("{}[", "a*".repeat(100));
    assert_eq!(c.cmd(&["CONFIG", "GET", &evil]), Reply::Array(Some(vec![])));
    assert_eq!(
        c.cmd(&["COMMAND", "LIST", "FILTERBY", "PATTERN", &pattern]),
        Reply::Array(Some(vec![]))
    );
    assert!(matches!(
        c.cmd(&["CONFIG", "SET", "maxmemory-clients", "-5"]),
        Reply::Error(_)
    ));
    assert!(matches!(
        c.cmd(&["CONFIG", "SET", "timeout", "99999999999999999999"]),
        Reply::Error(_)
    ));
    assert!(matches!(
        c.cmd(&["CLIENT", "KILL", "ID", "-1"]),
        Reply::Error(_)
    ));
    assert!(matches!(
        c.cmd(&["COMMAND", "GETKEYS", "getset", "a"]),
        Reply::Error(_)
    ));
    assert_eq!(c.cmd(&["PING"]), Reply::Simple("PONG".into()));
    srv.stop();
}

#[test]
fn client_names_count_against_maxmemory_clients() {
    let srv = start_with(config(1));
    let mut admin = Client::connect(&srv);
    assert_eq!(admin.cmd(&["CLIENT", "NO-EVICT", "on"]), ok());
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "maxmemory-clients", "1mb"]),
        ok()
    );
    let name = "n".repeat(400 << 10);
    // One after another (each answered or closed before the next), so that only the names
    // held, not several requests in flight at once, can pass the cap.
    let mut named = Vec::new();
    for _ in 0..4 {
        use std::io::{Read, Write};
        let mut c = std::net::TcpStream::connect(srv.addr()).unwrap();
        c.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        let cmd = format!(
            "*3\r\n$6\r\nCLIENT\r\n$7\r\nSETNAME\r\n${}\r\n{name}\r\n",
            name.len()
        );
        let _ = c.write_all(cmd.as_bytes());
        let mut reply = [0u8; 5];
        let _ = c.read(&mut reply);
        named.push(c);
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while common::info_field(&mut admin, "evicted_clients") == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "four 400 KiB names fit a 1 MiB maxmemory-clients"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    srv.stop();
}
