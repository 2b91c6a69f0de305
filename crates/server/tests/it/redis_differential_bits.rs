//! Differential test of the byte-range and bit commands (GETRANGE SUBSTR SETRANGE GETBIT SETBIT
//! BITCOUNT BITPOS) against a real redis-server, reply bytes compared: fixed edge cases (negative
//! and huge indexes, BYTE and BIT units, the missing-key answers Redis gives before it checks
//! the range, every error text), then a seeded random mix over a few hot keys. No
//! normalisation applies (`differential/mod.rs`). directkv runs with several shards.

use crate::common;
use crate::differential;

use differential::{Pair, Rng};
use directkv_testkit::peer::start_redis;
use directkv_testkit::raw::RawClient;

const SHARDS: usize = 3;

/// Fixed scripts: each line is sent to both servers and the replies must be byte-equal.
const SCRIPT: &[&[&str]] = &[
    &["SET", "s", "This is a string"],
    &["GETRANGE", "s", "0", "3"],
    &["GETRANGE", "s", "-3", "-1"],
    &["GETRANGE", "s", "0", "-1"],
    &["GETRANGE", "s", "10", "100"],
    &["GETRANGE", "s", "-1", "-5"],
    &["GETRANGE", "s", "5", "3"],
    &["GETRANGE", "s", "-100", "-90"],
    &[
        "GETRANGE",
        "s",
        "-9223372036854775808",
        "9223372036854775807",
    ],
    &["GETRANGE", "s", "x", "1"],
    &["GETRANGE", "s", "1", "9223372036854775808"],
    &["GETRANGE", "missing", "0", "-1"],
    &["GETRANGE", "missing", "x", "-1"],
    &["GETRANGE", "s", "0"],
    &["SUBSTR", "s", "1", "2"],
    &["SUBSTR", "missing", "1", "2"],
    &["SETRANGE", "s", "10", "STRING"],
    &["GET", "s"],
    &["SETRANGE", "new", "5", "abc"],
    &["GET", "new"],
    &["SETRANGE", "none", "5", ""],
    &["EXISTS", "none"],
    &["SETRANGE", "s", "1000", ""],
    &["SETRANGE", "s", "-1", "x"],
    &["SETRANGE", "s", "x", "x"],
    &["SETRANGE", "s", "536870911", "xy"],
    &["SETRANGE", "s", "536870912", "x"],
    &["SETRANGE", "s", "536870912", ""],
    &["SETRANGE", "none", "9223372036854775807", "x"],
    &["SETRANGE", "s", "0"],
    &["STRLEN", "s"],
    &["SETBIT", "b", "7", "1"],
    &["GET", "b"],
    &["SETBIT", "b", "7", "0"],
    &["SETBIT", "b", "7", "0"],
    &["SETBIT", "b", "100", "1"],
    &["STRLEN", "b"],
    &["GETBIT", "b", "100"],
    &["GETBIT", "b", "99"],
    &["GETBIT", "b", "100000"],
    &["GETBIT", "missing", "3"],
    &["GETBIT", "b", "-1"],
    &["GETBIT", "b", "x"],
    &["GETBIT", "b", "4294967296"],
    &["GETBIT", "b", "4294967295"],
    &["SETBIT", "b", "-1", "1"],
    &["SETBIT", "b", "x", "1"],
    &["SETBIT", "b", "1", "2"],
    &["SETBIT", "b", "1", "-1"],
    &["SETBIT", "b", "1", "x"],
    &["SETBIT", "b", "x", "x"],
    &["SETBIT", "b", "4294967296", "1"],
    &["SETBIT", "b", "1"],
    &["SET", "c", "foobar"],
    &["BITCOUNT", "c"],
    &["BITCOUNT", "c", "0", "0"],
    &["BITCOUNT", "c", "1", "1"],
    &["BITCOUNT", "c", "1", "1", "BYTE"],
    &["BITCOUNT", "c", "5", "30", "BIT"],
    &["BITCOUNT", "c", "5", "30", "bit"],
    &["BITCOUNT", "c", "-3", "-1", "BIT"],
    &["BITCOUNT", "c", "-1", "-3"],
    &["BITCOUNT", "c", "-1", "-3", "BOGUS"],
    &["BITCOUNT", "c", "0", "-1", "BOGUS"],
    &["BITCOUNT", "c", "0"],
    &["BITCOUNT", "c", "0", "1", "BIT", "x"],
    &["BITCOUNT", "c", "x", "1"],
    &["BITCOUNT", "c", "1", "x"],
    &["BITCOUNT", "c", "100", "200"],
    &["BITCOUNT", "c", "-100", "-50"],
    &[
        "BITCOUNT",
        "c",
        "-9223372036854775808",
        "9223372036854775807",
        "BIT",
    ],
    &["BITCOUNT", "missing"],
    &["BITCOUNT", "missing", "0"],
    &["BITCOUNT", "missing", "x", "y"],
    &["BITCOUNT"],
    &["SET", "p", "\u{0}\u{0}\u{0}"],
    &["BITPOS", "p", "1"],
    &["BITPOS", "p", "0"],
    &["SET", "p", "\u{7f}"],
    &["BITPOS", "p", "0"],
    &["BITPOS", "p", "1"],
    &["SETBIT", "q", "0", "1"],
    &["SETBIT", "q", "1", "1"],
    &["SETBIT", "q", "2", "1"],
    &["SETBIT", "q", "3", "1"],
    &["SETBIT", "q", "4", "1"],
    &["SETBIT", "q", "5", "1"],
    &["SETBIT", "q", "6", "1"],
    &["SETBIT", "q", "7", "1"],
    &["SETBIT", "q", "8", "1"],
    &["SETBIT", "q", "9", "1"],
    &["SETBIT", "q", "10", "1"],
    &["SETBIT", "q", "11", "1"],
    &["SETBIT", "q", "12", "1"],
    &["SETBIT", "q", "13", "1"],
    &["SETBIT", "q", "14", "1"],
    &["SETBIT", "q", "15", "1"],
    &["BITPOS", "q", "0"],
    &["BITPOS", "q", "0", "0"],
    &["BITPOS", "q", "0", "0", "-1"],
    &["BITPOS", "q", "0", "1", "1"],
    &["BITPOS", "q", "1", "1"],
    &["BITPOS", "q", "0", "3", "10", "BIT"],
    &["BITPOS", "q", "0", "3", "15", "BIT"],
    &["BITPOS", "q", "1", "3", "10", "BIT"],
    &["BITPOS", "q", "1", "5", "-1", "bit"],
    &["BITPOS", "q", "0", "-1", "-1", "BYTE"],
    &["BITPOS", "q", "0", "10", "5"],
    &["BITPOS", "q", "1", "-100", "-90"],
    &["BITPOS", "q", "2"],
    &["BITPOS", "q", "-1"],
    &["BITPOS", "q", "x"],
    &["BITPOS", "q", "1", "x"],
    &["BITPOS", "q", "1", "0", "x"],
    &["BITPOS", "q", "1", "0", "1", "BOGUS"],
    &["BITPOS", "q", "1", "x", "1", "BOGUS"],
    &["BITPOS", "q", "1", "0", "x", "BOGUS"],
    &["BITPOS", "q", "1", "0", "1", "BIT", "x"],
    &["BITPOS", "missing", "1"],
    &["BITPOS", "missing", "0"],
    &["BITPOS", "missing", "0", "x"],
    &["BITPOS", "missing", "0", "1", "2", "BOGUS", "extra"],
    &["BITPOS", "missing", "5"],
    &["BITPOS", "q"],
    &["SET", "e", ""],
    &["BITPOS", "e", "0"],
    &["BITPOS", "e", "1"],
    &["BITCOUNT", "e"],
    &["GETRANGE", "e", "0", "-1"],
    &["GETBIT", "e", "0"],
    &["SETRANGE", "e", "0", ""],
    &["SET", "n", "12345"],
    &["SETRANGE", "n", "1", "x"],
    &["GET", "n"],
    &["SETBIT", "n", "0", "1"],
    &["GET", "n"],
    &["INCR", "n"],
];

fn pair(server: &directkv_server::Server, redis: std::net::SocketAddr) -> Pair {
    let mut flush = RawClient::connect(redis);
    assert_eq!(flush.cmd(&["FLUSHALL"]), b"+OK\r\n");
    let mut p = Pair::connect(server.addr(), redis, "bits");
    p.same(&["FLUSHALL"]);
    p
}

#[test]
fn bit_and_range_commands_match_redis() {
    let Some(redis) = start_redis() else {
        return;
    };
    let server = common::start(SHARDS);
    let mut p = pair(&server, redis.addr);
    for args in SCRIPT {
        p.same(args);
    }
    p.assert_none();
    server.stop();
}

#[test]
fn random_bit_and_range_commands_match_redis() {
    let Some(redis) = start_redis() else {
        return;
    };
    let server = common::start(SHARDS);
    let mut p = pair(&server, redis.addr);
    let mut rng = Rng(0x5eed_b175);
    let keys = ["k0", "k1", "k2", "k3"];
    let idx = |rng: &mut Rng| -> String {
        let n = rng.below(90) as i64 - 40;
        if rng.percent(5) {
            ["9223372036854775807", "-9223372036854775808", "x"][rng.below(3)].to_string()
        } else {
            n.to_string()
        }
    };
    for _ in 0..3000 {
        let k = *rng.pick(&keys);
        let args: Vec<String> = match rng.below(9) {
            0 => vec![
                "SETBIT".into(),
                k.into(),
                rng.below(200).to_string(),
                rng.below(2).to_string(),
            ],
            1 => vec!["GETBIT".into(), k.into(), rng.below(220).to_string()],
            2 => {
                let v: String = (0..rng.below(6))
                    .map(|_| (b'a' + rng.below(26) as u8) as char)
                    .collect();
                vec!["SETRANGE".into(), k.into(), rng.below(30).to_string(), v]
            }
            3 => vec!["GETRANGE".into(), k.into(), idx(&mut rng), idx(&mut rng)],
            4 => {
                let mut a = vec!["BITCOUNT".into(), k.into()];
                if rng.percent(70) {
                    a.push(idx(&mut rng));
                    a.push(idx(&mut rng));
                    if rng.percent(50) {
                        a.push((*rng.pick(&["BIT", "BYTE", "bit"])).into());
                    }
                }
                a
            }
            5 | 6 => {
                let mut a = vec!["BITPOS".into(), k.into(), rng.below(2).to_string()];
                let extra = rng.below(4);
                if extra >= 1 {
                    a.push(idx(&mut rng));
                }
                if extra >= 2 {
                    a.push(idx(&mut rng));
                }
                if extra >= 3 {
                    a.push((*rng.pick(&["BIT", "BYTE"])).into());
                }
                a
            }
            7 => vec!["DEL".into(), k.into()],
            _ => vec!["GET".into(), k.into()],
        };
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        p.same(&a);
        if p.differences.len() > 20 {
            break;
        }
    }
    p.assert_none();
    server.stop();
}
