//! A correctness soak of the memcached port (issue 21): several clients at once, each running a
//! seeded random mix of text and meta commands (set, get, gets, cas, append, prepend, delete,
//! incr, decr, touch, mg, ms, md, ma, mn, with and without noreply) in pipelined rounds on keys
//! of its own, and checking every reply line against a model of its keys. Between rounds the
//! clients stop together and the server's `stats` must count exactly the items and key-value
//! bytes the models hold; after each pass every key is deleted, and the arena's `used_memory`
//! (INFO) must come back to the same figure after every pass: nothing leaks, pass after pass.
//!
//! ```text
//!  client c (thread)  round: ~ROUND_COMMANDS commands, written by a writer thread while
//!                     the replies are read and compared, in order, with the model's
//!  main               barrier ─> stats curr_items / bytes == Σ models ─> barrier
//!  pass end           clients delete their keys ─> used_memory == after the first pass
//! ```
//!
//! Bounded by rounds, not time: `DIRECTKV_MC_SOAK_ROUNDS` (default 40 per pass) runs a longer
//! soak by hand. Expiry is never reached (exptimes are 10 days), so the model needs no clock.

use std::collections::HashMap;
use std::io::Write;
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use crate::common;
use crate::differential::Rng;
use crate::memcache_client::Mc;

const CLIENTS: usize = 4;
const KEYS_PER_CLIENT: usize = 24;
const ROUND_COMMANDS: usize = 24;
const PASSES: usize = 2;
/// Rounds between two checks of the server's counts.
const CHECK_EVERY: usize = 10;
/// A relative exptime of 10 days: never reached during the test.
const EXPTIME: u32 = 864_000;

/// A client's item, as the model holds it.
#[derive(Clone)]
struct Item {
    value: Vec<u8>,
    flags: u32,
    /// The CAS unique a `gets` showed since the last change, if any.
    cas: Option<u64>,
    /// Bumped by every change, so a `gets` answered after a later change of the same round
    /// teaches nothing.
    version: u64,
}

/// One expected piece of a reply.
enum Want {
    Line(String),
    /// `VALUE key flags len [cas]` and the data block; with `learn`, the CAS is read and kept
    /// for the key if it has not changed since (`version`).
    Value {
        key: Vec<u8>,
        flags: u32,
        value: Vec<u8>,
        learn: Option<u64>,
    },
    /// `VA len <flags...>` and the data block.
    Va {
        head: String,
        value: Vec<u8>,
    },
}

struct Client {
    id: usize,
    rng: Rng,
    keys: Vec<Vec<u8>>,
    items: HashMap<Vec<u8>, Item>,
    version: u64,
}

/// memcached's number check as far as the model's values go: digits, then spaces (the padding
/// incr and decr leave).
fn number(v: &[u8]) -> Option<u64> {
    let digits = v.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || digits > 18 || v[digits..].iter().any(|&b| b != b' ') {
        return None;
    }
    std::str::from_utf8(&v[..digits]).ok()?.parse().ok()
}

impl Client {
    fn new(id: usize, seed: u64) -> Client {
        let mut keys: Vec<Vec<u8>> = (0..KEYS_PER_CLIENT)
            .map(|j| format!("soak{id}-{j}").into_bytes())
            .collect();
        // One key of memcached's maximum length.
        let mut long = format!("soak{id}-long-").into_bytes();
        long.resize(250, b'L');
        keys.push(long);
        Client {
            id,
            rng: Rng(seed),
            keys,
            items: HashMap::new(),
            version: 0,
        }
    }

    fn value(&mut self) -> Vec<u8> {
        if self.rng.percent(35) {
            return (self.rng.below(1_000_000) as u64).to_string().into_bytes();
        }
        // Lengths that make inline entries, small records and large ones.
        let len = *self.rng.pick(&[0usize, 1, 7, 8, 16, 40, 100, 600]);
        let c = b'a' + self.rng.below(26) as u8;
        vec![c; len]
    }

    fn set_item(&mut self, key: &[u8], value: Vec<u8>, flags: u32) {
        self.version += 1;
        self.items.insert(
            key.to_vec(),
            Item {
                value,
                flags,
                cas: None,
                version: self.version,
            },
        );
    }

    /// A change that keeps flags and deadline (append, prepend, incr, decr).
    fn change(&mut self, key: &[u8], value: Vec<u8>) {
        self.version += 1;
        let v = self.version;
        let item = self.items.get_mut(key).expect("present");
        item.value = value;
        item.cas = None;
        item.version = v;
    }

    /// incr/decr (and ma) on a present numeric item: the reply number and the stored value
    /// (a shorter result padded with spaces to the old length, as memcached rewrites in place).
    fn arith(&mut self, key: &[u8], incr: bool, delta: u64) -> u64 {
        let old = self.items[key].value.clone();
        let n = number(&old).expect("numeric");
        let n = if incr {
            n + delta
        } else {
            n.saturating_sub(delta)
        };
        let mut v = n.to_string().into_bytes();
        if v.len() < old.len() {
            v.resize(old.len(), b' ');
        }
        self.change(key, v);
        n
    }

    /// One random command: its bytes and the replies it must get.
    fn command(&mut self, out: &mut Vec<u8>, want: &mut Vec<Want>) {
        let key = self.rng.pick(&self.keys).clone();
        let k = String::from_utf8(key.clone()).unwrap();
        let present = self.items.contains_key(&key);
        let numeric = present && number(&self.items[&key].value).is_some();
        let line = |s: &str| Want::Line(s.to_string());
        match self.rng.below(100) {
            0..=19 => {
                let value = self.value();
                let flags = self.rng.below(1 << 20) as u32;
                let noreply = self.rng.percent(20);
                write!(out, "set {k} {flags} {EXPTIME} {}", value.len()).unwrap();
                out.extend_from_slice(if noreply { b" noreply\r\n" } else { b"\r\n" });
                out.extend_from_slice(&value);
                out.extend_from_slice(b"\r\n");
                if !noreply {
                    want.push(line("STORED"));
                }
                self.set_item(&key, value, flags);
            }
            20..=39 => {
                let n = 1 + self.rng.below(5);
                let keys: Vec<Vec<u8>> =
                    (0..n).map(|_| self.rng.pick(&self.keys).clone()).collect();
                out.extend_from_slice(b"get");
                for key in &keys {
                    out.push(b' ');
                    out.extend_from_slice(key);
                    if let Some(i) = self.items.get(key) {
                        want.push(Want::Value {
                            key: key.clone(),
                            flags: i.flags,
                            value: i.value.clone(),
                            learn: None,
                        });
                    }
                }
                out.extend_from_slice(b"\r\n");
                want.push(line("END"));
            }
            40..=47 => {
                write!(out, "gets {k}\r\n").unwrap();
                if let Some(i) = self.items.get(&key) {
                    want.push(Want::Value {
                        key: key.clone(),
                        flags: i.flags,
                        value: i.value.clone(),
                        learn: Some(i.version),
                    });
                }
                want.push(line("END"));
            }
            48..=54 => {
                let value = self.value();
                let (unique, reply) = match self.items.get(&key).map(|i| i.cas) {
                    None => (12_345, "NOT_FOUND"),
                    Some(Some(c)) if self.rng.percent(70) => (c, "STORED"),
                    // A CAS no item has had (they are far smaller).
                    Some(_) => (1 << 50, "EXISTS"),
                };
                write!(out, "cas {k} 5 {EXPTIME} {} {unique}\r\n", value.len()).unwrap();
                out.extend_from_slice(&value);
                out.extend_from_slice(b"\r\n");
                want.push(line(reply));
                if reply == "STORED" {
                    self.set_item(&key, value, 5);
                }
            }
            55..=61 => {
                let append = self.rng.percent(50);
                let data = vec![b'x'; 1 + self.rng.below(20)];
                let verb = if append { "append" } else { "prepend" };
                write!(out, "{verb} {k} 0 0 {}\r\n", data.len()).unwrap();
                out.extend_from_slice(&data);
                out.extend_from_slice(b"\r\n");
                if present {
                    want.push(line("STORED"));
                    let mut v = self.items[&key].value.clone();
                    if append {
                        v.extend_from_slice(&data);
                    } else {
                        v.splice(0..0, data);
                    }
                    self.change(&key, v);
                } else {
                    want.push(line("NOT_STORED"));
                }
            }
            62..=67 => {
                let noreply = self.rng.percent(30);
                write!(
                    out,
                    "delete {k}{}\r\n",
                    if noreply { " noreply" } else { "" }
                )
                .unwrap();
                if !noreply {
                    want.push(line(if present { "DELETED" } else { "NOT_FOUND" }));
                }
                self.items.remove(&key);
            }
            68..=75 => {
                let incr = self.rng.percent(50);
                let delta = self.rng.below(1000) as u64;
                let verb = if incr { "incr" } else { "decr" };
                if present && !numeric {
                    return;
                }
                write!(out, "{verb} {k} {delta}\r\n").unwrap();
                if present {
                    let n = self.arith(&key, incr, delta);
                    want.push(Want::Line(n.to_string()));
                } else {
                    want.push(line("NOT_FOUND"));
                }
            }
            76..=79 => {
                write!(out, "touch {k} {EXPTIME}\r\n").unwrap();
                want.push(line(if present { "TOUCHED" } else { "NOT_FOUND" }));
            }
            80..=87 => {
                write!(out, "mg {k} v f\r\n").unwrap();
                match self.items.get(&key) {
                    Some(i) => want.push(Want::Va {
                        head: format!("VA {} f{}", i.value.len(), i.flags),
                        value: i.value.clone(),
                    }),
                    None => want.push(line("EN")),
                }
            }
            88..=92 => {
                let value = self.value();
                let flags = self.rng.below(1000) as u32;
                write!(out, "ms {k} {} F{flags} T{EXPTIME}\r\n", value.len()).unwrap();
                out.extend_from_slice(&value);
                out.extend_from_slice(b"\r\n");
                want.push(line("HD"));
                self.set_item(&key, value, flags);
            }
            93..=95 => {
                write!(out, "md {k}\r\n").unwrap();
                want.push(line(if present { "HD" } else { "NF" }));
                self.items.remove(&key);
            }
            96..=98 => {
                if present && !numeric {
                    return;
                }
                write!(out, "ma {k} v\r\n").unwrap();
                if present {
                    let n = self.arith(&key, true, 1).to_string();
                    want.push(Want::Va {
                        head: format!("VA {}", n.len()),
                        value: n.into_bytes(),
                    });
                } else {
                    want.push(line("NF"));
                }
            }
            _ => {
                out.extend_from_slice(b"mn\r\n");
                want.push(line("MN"));
            }
        }
    }

    /// One round: commands written by a writer thread while the replies are checked.
    fn round(&mut self, c: &mut Mc, round: usize) {
        let mut out = Vec::new();
        let mut want = Vec::new();
        for _ in 0..ROUND_COMMANDS {
            self.command(&mut out, &mut want);
        }
        // Every reply is read before the round ends: noreply and quiet commands included.
        out.extend_from_slice(b"mn\r\n");
        want.push(Want::Line("MN".to_string()));
        let mut writer = c.s.try_clone().expect("clone the socket");
        std::thread::scope(|s| {
            s.spawn(move || writer.write_all(&out).expect("write a round"));
            for (n, w) in want.iter().enumerate() {
                let at = format!("client {} round {round} reply {n}", self.id);
                self.check(c, w, &at);
            }
        });
    }

    fn check(&mut self, c: &mut Mc, w: &Want, at: &str) {
        match w {
            Want::Line(l) => assert_eq!(&c.line(), l, "{at}"),
            Want::Va { head, value } => {
                assert_eq!(&c.line(), head, "{at}");
                assert_eq!(&c.block(value.len()), value, "{at}");
            }
            Want::Value {
                key,
                flags,
                value,
                learn,
            } => {
                let line = c.line();
                let head = format!(
                    "VALUE {} {flags} {}",
                    String::from_utf8_lossy(key),
                    value.len()
                );
                let cas = match learn {
                    None => {
                        assert_eq!(line, head, "{at}");
                        None
                    }
                    Some(version) => {
                        let (h, cas) = line.rsplit_once(' ').expect("a CAS");
                        assert_eq!(h, head, "{at}");
                        Some((*version, cas.parse::<u64>().expect("a CAS number")))
                    }
                };
                assert_eq!(&c.block(value.len()), value, "{at}");
                if let Some((version, cas)) = cas {
                    assert_ne!(cas, 0, "{at}");
                    if let Some(i) = self.items.get_mut(key) {
                        if i.version == version {
                            i.cas = Some(cas);
                        }
                    }
                }
            }
        }
    }

    /// Items and key-value bytes the model holds.
    fn totals(&self) -> (u64, u64) {
        let bytes = self
            .items
            .iter()
            .map(|(k, i)| k.len() + i.value.len())
            .sum::<usize>();
        (self.items.len() as u64, bytes as u64)
    }

    /// Deletes every key, checking each answer.
    fn delete_all(&mut self, c: &mut Mc) {
        for key in self.keys.clone() {
            let k = String::from_utf8(key.clone()).unwrap();
            let want = if self.items.remove(&key).is_some() {
                "DELETED"
            } else {
                "NOT_FOUND"
            };
            c.expect(&format!("delete {k}\r\n"), &[want]);
        }
    }
}

fn stat_u64(c: &mut Mc, name: &str) -> u64 {
    c.stat(name).parse().expect("a number")
}

#[test]
fn clients_mixing_text_and_meta_commands_keep_exact_counts_and_stable_memory() {
    let rounds: usize = std::env::var("DIRECTKV_MC_SOAK_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let srv = common::start(2);
    let mut admin = Mc::connect(&srv);
    let mut resp = common::Client::connect(&srv);
    let connections_before = stat_u64(&mut admin, "curr_connections");
    let barrier = Barrier::new(CLIENTS + 1);
    let totals = Mutex::new(vec![(0u64, 0u64); CLIENTS]);
    let mut used_after_pass = Vec::new();
    for pass in 0..PASSES {
        std::thread::scope(|s| {
            for id in 0..CLIENTS {
                let (srv, barrier, totals) = (&srv, &barrier, &totals);
                s.spawn(move || {
                    let mut client = Client::new(id, 0x50A4 + (pass * CLIENTS + id) as u64);
                    let mut c = Mc::connect(srv);
                    for r in 0..rounds {
                        client.round(&mut c, r);
                        if (r + 1) % CHECK_EVERY == 0 || r + 1 == rounds {
                            totals.lock().unwrap()[id] = client.totals();
                            barrier.wait();
                            barrier.wait();
                        }
                    }
                    client.delete_all(&mut c);
                });
            }
            for r in 0..rounds {
                if (r + 1) % CHECK_EVERY != 0 && r + 1 != rounds {
                    continue;
                }
                barrier.wait();
                let (items, bytes) = totals
                    .lock()
                    .unwrap()
                    .iter()
                    .fold((0, 0), |a, t| (a.0 + t.0, a.1 + t.1));
                assert_eq!(
                    stat_u64(&mut admin, "curr_items"),
                    items,
                    "pass {pass} round {r}"
                );
                assert_eq!(
                    stat_u64(&mut admin, "bytes"),
                    bytes,
                    "pass {pass} round {r}"
                );
                barrier.wait();
            }
        });
        assert_eq!(stat_u64(&mut admin, "curr_items"), 0);
        assert_eq!(stat_u64(&mut admin, "bytes"), 0);
        used_after_pass.push(common::info_field(&mut resp, "used_memory"));
    }
    // Every pass stored and deleted items of every size: the arena's blocks all came back.
    assert!(
        used_after_pass.windows(2).all(|w| w[0] == w[1]),
        "used_memory after each pass: {used_after_pass:?}"
    );
    // The clients' connections are gone (closed by the server as they hung up).
    let deadline = Instant::now() + Duration::from_secs(20);
    while stat_u64(&mut admin, "curr_connections") != connections_before {
        assert!(
            Instant::now() < deadline,
            "client connections still counted"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    srv.stop();
}
