//! Connection commands, errors, authentication and hostile input over a real socket.

use crate::common;
use common::{bulk, info_field, ok, start, start_with, Client};
use directkv_proto::resp::Reply;
use directkv_server::ServerConfig;

#[test]
fn connection_commands() {
    let srv = start(1);
    let mut c = Client::connect(&srv);
    assert_eq!(c.cmd(&["PING"]), Reply::Simple("PONG".into()));
    assert_eq!(c.cmd(&["PING", "hi"]), bulk("hi"));
    assert_eq!(c.cmd(&["ECHO", "x y"]), bulk("x y"));
    assert_eq!(c.cmd(&["SELECT", "0"]), ok());
    assert_eq!(
        c.cmd(&["SELECT", "1"]),
        Reply::Error("ERR DB index is out of range".into())
    );
    assert_eq!(c.cmd(&["CLIENT", "SETNAME", "me"]), ok());
    assert_eq!(c.cmd(&["CLIENT", "GETNAME"]), bulk("me"));
    // Redis' rules: printable ASCII names, "" removes the name, subcommand arities.
    assert_eq!(
        c.cmd(&["CLIENT", "SETNAME", "a b"]),
        Reply::Error(
            "ERR Client names cannot contain spaces, newlines or special characters.".into()
        )
    );
    assert_eq!(c.cmd(&["CLIENT", "GETNAME"]), bulk("me"));
    assert_eq!(
        c.cmd(&["CLIENT", "GETNAME", "x"]),
        Reply::Error("ERR wrong number of arguments for 'client|getname' command".into())
    );
    assert_eq!(
        c.cmd(&["CLIENT", "SETNAME"]),
        Reply::Error("ERR wrong number of arguments for 'client|setname' command".into())
    );
    assert_eq!(c.cmd(&["CLIENT", "SETNAME", ""]), ok());
    assert_eq!(c.cmd(&["CLIENT", "GETNAME"]), Reply::Bulk(None));
    // Without requirepass the "default" user takes any password; there are no other users.
    assert_eq!(
        c.cmd(&["AUTH", "pw"]),
        Reply::Error("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?".into())
    );
    assert_eq!(c.cmd(&["AUTH", "default", "pw"]), ok());
    assert_eq!(
        c.cmd(&["AUTH", "someone", "pw"]),
        Reply::Error("WRONGPASS invalid username-password pair or user is disabled.".into())
    );
    assert_eq!(
        c.cmd(&["AUTH", "a", "b", "c"]),
        Reply::Error("ERR syntax error".into())
    );
    match c.cmd(&["CONFIG", "GET", "appendonly"]) {
        Reply::Array(Some(v)) => assert_eq!(v, vec![bulk("appendonly"), bulk("no")]),
        r => panic!("{r:?}"),
    }
    match c.cmd(&["INFO"]) {
        Reply::Bulk(Some(t)) => assert!(String::from_utf8(t)
            .unwrap()
            .contains("connected_clients:1")),
        r => panic!("{r:?}"),
    }
    assert_eq!(
        c.cmd(&["NOSUCH", "a", "b"]),
        Reply::Error("ERR unknown command 'NOSUCH', with args beginning with: 'a' 'b' ".into())
    );
    assert_eq!(
        c.cmd(&["GET"]),
        Reply::Error("ERR wrong number of arguments for 'get' command".into())
    );
    // Names match in any case; overlong and non-ASCII names are unknown commands, quoted as
    // sent; commands with many arguments still plan.
    assert_eq!(c.cmd(&["SeT", "k", "v"]), ok());
    assert_eq!(c.cmd(&["gEt", "k"]), bulk("v"));
    let long = "G".repeat(40);
    assert_eq!(
        c.cmd(&[&long, "k"]),
        Reply::Error(format!(
            "ERR unknown command '{long}', with args beginning with: 'k' "
        ))
    );
    assert_eq!(
        c.cmd(&["GÉT", "k"]),
        Reply::Error("ERR unknown command 'GÉT', with args beginning with: 'k' ".into())
    );
    let mset: Vec<String> = (0..12).map(|i| format!("m{}", i / 2)).collect();
    let mut args = vec!["MSET"];
    args.extend(mset.iter().map(String::as_str));
    assert_eq!(c.cmd(&args), ok());
    assert_eq!(c.cmd(&["GET", "m5"]), bulk("m5"));
    // The connection is still usable after errors.
    assert_eq!(c.cmd(&["PING"]), Reply::Simple("PONG".into()));
    srv.stop();
}

#[test]
fn hello_switches_to_resp3() {
    let srv = start(1);
    let mut c = Client::connect(&srv);
    match c.cmd(&["HELLO", "3"]) {
        Reply::Map(m) => assert!(m.contains(&(bulk("proto"), Reply::Integer(3)))),
        r => panic!("{r:?}"),
    }
    assert_eq!(c.cmd(&["GET", "missing"]), Reply::Null);
    assert_eq!(
        c.cmd(&["HELLO", "4"]),
        Reply::Error("NOPROTO unsupported protocol version".into())
    );
    // Redis 7's other HELLO errors; these change nothing.
    assert_eq!(
        c.cmd(&["HELLO", "x"]),
        Reply::Error("ERR Protocol version is not an integer or out of range".into())
    );
    assert_eq!(
        c.cmd(&["HELLO", "2", "Bogus"]),
        Reply::Error("ERR Syntax error in HELLO option 'Bogus'".into())
    );
    assert_eq!(
        c.cmd(&["HELLO", "2", "Bad\0rest"]),
        Reply::Error("ERR Syntax error in HELLO option 'Bad'".into())
    );
    assert_eq!(
        c.cmd(&["HELLO", "2", "AUTH", "default"]),
        Reply::Error("ERR Syntax error in HELLO option 'AUTH'".into())
    );
    assert_eq!(c.cmd(&["GET", "missing"]), Reply::Null);
    match c.cmd(&["HELLO", "2", "AUTH", "default", "any", "SETNAME", "me"]) {
        Reply::Array(Some(v)) => assert!(v.contains(&bulk("proto"))),
        r => panic!("{r:?}"),
    }
    assert_eq!(c.cmd(&["CLIENT", "GETNAME"]), bulk("me"));
    // Options take effect in turn: a bad one keeps the name set before it, not the protocol.
    assert_eq!(
        c.cmd(&["HELLO", "3", "SETNAME", "ok", "SETNAME", "a b"]),
        Reply::Error(
            "ERR Client names cannot contain spaces, newlines or special characters.".into()
        )
    );
    assert_eq!(c.cmd(&["GET", "missing"]), Reply::Bulk(None));
    assert_eq!(c.cmd(&["CLIENT", "GETNAME"]), bulk("ok"));
    srv.stop();
}

#[test]
fn pipelined_hello_changes_the_protocol_of_later_replies_only() {
    let srv = start(2);
    let mut c = Client::connect(&srv);
    let mut bytes = Vec::new();
    for cmd in [
        &["GET", "missing"][..],
        &["HELLO", "3"],
        &["GET", "missing"],
        &["HELLO", "2"],
        &["GET", "missing"],
    ] {
        let a: Vec<&[u8]> = cmd.iter().map(|s| s.as_bytes()).collect();
        directkv_proto::resp::encode_command(&a, &mut bytes);
    }
    c.send_raw(&bytes);
    assert_eq!(c.read(), Reply::Bulk(None));
    assert!(matches!(c.read(), Reply::Map(_)));
    assert_eq!(c.read(), Reply::Null);
    assert!(matches!(c.read(), Reply::Array(Some(_))));
    assert_eq!(c.read(), Reply::Bulk(None));
    srv.stop();
}

#[test]
fn requirepass_gates_commands() {
    let srv = start_with(ServerConfig {
        port: 0,
        shards: 1,
        memory_bytes: 8 << 20,
        requirepass: Some("pw".into()),
        appendonly: false,
        ..Default::default()
    });
    let mut c = Client::connect(&srv);
    assert_eq!(
        c.cmd(&["GET", "k"]),
        Reply::Error("NOAUTH Authentication required.".into())
    );
    assert_eq!(
        c.cmd(&["AUTH", "bad"]),
        Reply::Error("WRONGPASS invalid username-password pair or user is disabled.".into())
    );
    assert_eq!(
        c.cmd(&["AUTH", "someone", "pw"]),
        Reply::Error("WRONGPASS invalid username-password pair or user is disabled.".into())
    );
    assert_eq!(
        c.cmd(&["HELLO", "3", "AUTH", "someone", "pw"]),
        Reply::Error("WRONGPASS invalid username-password pair or user is disabled.".into())
    );
    assert_eq!(
        c.cmd(&["HELLO", "3"]),
        Reply::Error("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time".into())
    );
    assert_eq!(
        c.cmd(&["GET", "k"]),
        Reply::Error("NOAUTH Authentication required.".into())
    );
    assert_eq!(c.cmd(&["AUTH", "pw"]), ok());
    assert_eq!(c.cmd(&["SET", "k", "v"]), ok());
    let mut c = Client::connect(&srv);
    assert_eq!(c.cmd(&["AUTH", "default", "pw"]), ok());
    assert_eq!(c.cmd(&["GET", "k"]), bulk("v"));
    srv.stop();
}

#[test]
fn non_loopback_bind_without_password_is_refused() {
    let err = directkv_server::Server::start(ServerConfig {
        bind: "0.0.0.0".into(),
        port: 0,
        appendonly: false,
        ..Default::default()
    })
    .err()
    .unwrap();
    assert!(err.contains("requirepass"), "{err}");
}

#[test]
fn malformed_input_gets_a_protocol_error_and_others_are_unaffected() {
    let srv = start(2);
    let mut good = Client::connect(&srv);
    assert_eq!(good.cmd(&["SET", "k", "v"]), ok());
    let mut bad = Client::connect(&srv);
    bad.send_raw(b"*1\r\n$x\r\n");
    assert_eq!(
        bad.read(),
        Reply::Error("ERR Protocol error: invalid bulk length".into())
    );
    assert!(bad.closed());
    let mut bad2 = Client::connect(&srv);
    bad2.send_raw(b"*99999999999\r\n");
    assert!(matches!(bad2.read(), Reply::Error(e) if e.starts_with("ERR Protocol error")));
    let mut bad3 = Client::connect(&srv);
    bad3.send_raw(b"SET \"unbalanced\r\n");
    assert_eq!(
        bad3.read(),
        Reply::Error("ERR Protocol error: unbalanced quotes in request".into())
    );
    // Inline commands work and the good client is unaffected.
    let mut inline = Client::connect(&srv);
    inline.send_raw(b"GET k\r\n");
    assert_eq!(inline.read(), bulk("v"));
    assert_eq!(good.cmd(&["GET", "k"]), bulk("v"));
    srv.stop();
}

#[test]
fn oversized_values_are_rejected_and_the_store_is_unchanged() {
    let srv = start_with(ServerConfig {
        port: 0,
        shards: 1,
        memory_bytes: 8 << 20,
        value_len_max: 1000,
        appendonly: false,
        ..Default::default()
    });
    let mut c = Client::connect(&srv);
    assert_eq!(c.cmd(&["SET", "k", "small"]), ok());
    let big = "x".repeat(1001);
    assert!(matches!(c.cmd(&["SET", "k", &big]), Reply::Error(e) if e.contains("value_len_max")));
    assert_eq!(c.cmd(&["GET", "k"]), bulk("small"));
    let long_key = "k".repeat(251);
    assert!(
        matches!(c.cmd(&["SET", &long_key, "v"]), Reply::Error(e) if e.contains("key_len_max"))
    );
    srv.stop();
}

#[test]
fn dkv_vector_commands() {
    let srv = start(2);
    let mut c = Client::connect(&srv);
    assert_eq!(c.cmd(&["DKV.VSET", "v", "u32", "1", "5", "9"]), ok());
    let nums = |v: &[&str]| Reply::Array(Some(v.iter().map(|s| bulk(s)).collect()));
    assert_eq!(
        c.cmd(&["DKV.UPDATEV", "v", "mul", "u32", "2"]),
        nums(&["1", "5", "9"])
    );
    assert_eq!(c.cmd(&["DKV.VGET", "v", "u32"]), nums(&["2", "10", "18"]));
    assert_eq!(
        c.cmd(&["DKV.UPDATEVV", "v", "add", "u32", "1", "1", "1"]),
        nums(&["2", "10", "18"])
    );
    assert_eq!(c.cmd(&["DKV.REDUCE", "v", "sum", "u32", "0"]), bulk("33"));
    assert_eq!(
        c.cmd(&["DKV.FILTER", "v", "gt", "u32", "5"]),
        nums(&["11", "19"])
    );
    assert_eq!(c.cmd(&["DKV.UPDATE", "ctr", "add", "i64", "-5"]), bulk("0"));
    assert_eq!(c.cmd(&["DKV.UPDATE", "ctr", "add", "i64", "1"]), bulk("-5"));
    assert!(matches!(c.cmd(&["DKV.VGET", "v", "u64"]), Reply::Error(_)));
    assert!(
        matches!(c.cmd(&["DKV.UPDATE", "v", "nosuch", "u32", "1"]), Reply::Error(e) if e.contains("unknown function"))
    );
    srv.stop();
}

#[test]
fn prometheus_metrics_over_http() {
    use std::io::{Read, Write};
    let srv = start(2);
    let mut c = Client::connect(&srv);
    assert_eq!(c.cmd(&["SET", "k", "v"]), ok());
    assert_eq!(c.cmd(&["GET", "k"]), bulk("v"));
    let mut h = std::net::TcpStream::connect(srv.metrics_addr().unwrap()).unwrap();
    h.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    h.read_to_string(&mut text).unwrap();
    assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
    assert!(text.contains("directkv_connections 1"), "{text}");
    let keys: u64 = text
        .lines()
        .filter(|l| l.starts_with("directkv_keys{"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(keys, 1);
    assert!(text.contains("kind=\"get\""));
    srv.stop();
}

#[test]
fn connections_max_and_input_limits() {
    let srv = start_with(ServerConfig {
        port: 0,
        shards: 1,
        memory_bytes: 8 << 20,
        connections_max: 2,
        conn_input_bytes_max: 1 << 20,
        appendonly: false,
        ..Default::default()
    });
    let mut a = Client::connect(&srv);
    let mut b = Client::connect(&srv);
    assert_eq!(a.cmd(&["PING"]), Reply::Simple("PONG".into()));
    assert_eq!(b.cmd(&["PING"]), Reply::Simple("PONG".into()));
    let mut c = Client::connect(&srv);
    assert_eq!(
        c.read(),
        Reply::Error("ERR max number of clients reached".into())
    );
    drop(c);
    // A command larger than conn_input_bytes_max closes that connection only.
    let huge = format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${}\r\n", 4 << 20);
    b.send_raw(huge.as_bytes());
    // The server answers and closes once it has seen more than the limit, so the rest of this
    // write may meet a reset: only the error reply matters.
    let _ = std::io::Write::write_all(&mut b.writer(), &vec![b'x'; 2 << 20]);
    assert!(matches!(b.read(), Reply::Error(e) if e.contains("conn_input_bytes_max")));
    assert_eq!(a.cmd(&["PING"]), Reply::Simple("PONG".into()));
    srv.stop();
}

#[test]
fn info_counts_ocsm_datagrams_messages_and_errors() {
    use std::net::UdpSocket;
    use std::time::Duration;
    let srv = start_with(ServerConfig {
        port: 0,
        shards: 1,
        memory_bytes: 32 << 20,
        ocsm_port: Some(0),
        appendonly: false,
        ..ServerConfig::default()
    });
    let mut c = Client::connect(&srv);
    assert_eq!(info_field(&mut c, "ocsm_datagrams"), 0);
    let u = UdpSocket::bind("127.0.0.1:0").unwrap();
    u.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    u.connect(srv.ocsm_addr().expect("OCSM on")).unwrap();
    let mut buf = [0u8; 2048];
    // One insert message (the first record of the OCSM test vectors), then a datagram whose
    // header promises more messages than it carries.
    let hex = "010000010100757365723030303030303432616c696365000000000000001000000001010201";
    let insert: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    u.send(&insert).unwrap();
    assert!(u.recv(&mut buf).unwrap() > 6);
    let mut truncated = insert.clone();
    truncated[4] = 9; // count 9, one message present
    u.send(&truncated).unwrap();
    assert!(u.recv(&mut buf).unwrap() >= 6);
    assert_eq!(info_field(&mut c, "ocsm_datagrams"), 2);
    assert_eq!(info_field(&mut c, "ocsm_messages"), 1);
    assert_eq!(info_field(&mut c, "ocsm_errors"), 1);
    assert_eq!(info_field(&mut c, "forwarded_batches"), 0);
    srv.stop();
}

#[test]
fn info_counts_every_command_before_it_in_a_pipeline() {
    let srv = start(1);
    let mut c = Client::connect(&srv);
    // INFO counts itself, as each command is counted when it arrives.
    let before = info_field(&mut c, "total_commands_processed");
    // Three commands and INFO in one write: the counter is added to per read, and flushed
    // before INFO runs.
    let mut out = Vec::new();
    for _ in 0..3 {
        directkv_proto::resp::encode_command(&[b"PING"], &mut out);
    }
    directkv_proto::resp::encode_command(&[b"INFO"], &mut out);
    c.send_raw(&out);
    for _ in 0..3 {
        assert_eq!(c.read(), Reply::Simple("PONG".into()));
    }
    let text = match c.read() {
        Reply::Bulk(Some(t)) => String::from_utf8(t).unwrap(),
        r => panic!("{r:?}"),
    };
    let during: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("total_commands_processed:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(during, before + 4, "{text}");
    // Commands after the last barrier of a read are counted at its end.
    assert_eq!(c.cmd(&["PING"]), Reply::Simple("PONG".into()));
    assert_eq!(info_field(&mut c, "total_commands_processed"), before + 6);
    srv.stop();
}
