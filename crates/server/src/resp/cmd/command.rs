//! COMMAND and its subcommands (COUNT, INFO, DOCS, LIST [FILTERBY], GETKEYS, HELP), generated
//! from the command table (`COMMANDS` in `mod.rs`) and the metadata below, so that
//! redis-cli's hints and cluster-aware clients see the same shapes as from Redis 7.
//!
//! ```text
//!  COMMANDS (name, arity)   ──┐
//!                             ├──> meta(name): Redis 7.0's flags, first/last/step key,
//!  META (name → Meta), below ─┘    ACL categories, tips, key specs, docs summary/since/group
//!                                  (a command without a row gets `Meta::plain`: its arity,
//!                                  no flags, no keys)
//! ```
//!
//! A helper adding a command adds its `COMMANDS` row and, to describe it, a `META` row (copy
//! the values from Redis 7's `COMMAND INFO name` and `COMMAND DOCS name`); until then the
//! command is listed with its arity and no keys. Container commands (CLIENT, CONFIG, COMMAND)
//! list, as subcommands, the `container|sub` rows of the subcommands directkv has.
//!
//! Non-goals: COMMAND DOCS `arguments` and `history` (redis-cli 7.0 has its own help table);
//! GETKEYSANDFLAGS.

use directkv_proto::resp::{self, RespWriter, Version};

use super::{arity, error, Planned};
use crate::resp::reply::Pending;

/// A key specification, as Redis 7 reports it in COMMAND INFO.
pub struct KeySpec {
    /// Empty: no `notes` field.
    pub notes: &'static str,
    pub flags: &'static [&'static str],
    pub begin: Begin,
    pub find: Find,
}

/// Where the search for keys begins. (`Keyword` and `Keynum` describe commands such as
/// Redis's XREAD and EVAL, which directkv does not have yet.)
#[allow(dead_code)]
pub enum Begin {
    /// At this argument.
    Index(i64),
    /// After this keyword, searched from this argument.
    Keyword(&'static str, i64),
}

/// How the keys are found from there.
#[allow(dead_code)]
pub enum Find {
    /// `(lastkey, keystep, limit)`.
    Range(i64, i64, i64),
    /// `(keynumidx, firstkey, keystep)`.
    Keynum(i64, i64, i64),
}

/// What COMMAND INFO and COMMAND DOCS say about one command (`name`) or subcommand
/// (`container|sub`).
pub struct Meta {
    pub name: &'static str,
    pub arity: i32,
    pub flags: &'static [&'static str],
    /// First key, last key (negative: from the end), step between keys; 0s: no keys.
    pub keys: (i64, i64, i64),
    pub acl: &'static [&'static str],
    pub tips: &'static [&'static str],
    pub key_specs: &'static [KeySpec],
    pub summary: &'static str,
    pub since: &'static str,
    pub group: &'static str,
    pub complexity: &'static str,
}

impl Meta {
    /// A command without a `META` row: its arity and nothing else.
    const fn plain(name: &'static str, arity: i32) -> Meta {
        Meta {
            name,
            arity,
            flags: &[],
            keys: (0, 0, 0),
            acl: &[],
            tips: &[],
            key_specs: &[],
            summary: "",
            since: "",
            group: "",
            complexity: "",
        }
    }
}

/// The metadata of the command `name` (lower case), if the server has it.
pub fn meta(name: &str) -> Option<Meta> {
    if name.contains('|') {
        return META.iter().find(|m| m.name == name).map(copy);
    }
    let row = super::COMMANDS.iter().find(|(n, _)| *n == name)?;
    Some(
        META.iter()
            .find(|m| m.name == name)
            .map(copy)
            .unwrap_or(Meta::plain(row.0, row.1)),
    )
}

fn copy(m: &Meta) -> Meta {
    Meta {
        key_specs: m.key_specs,
        ..Meta::plain(m.name, m.arity)
    }
    .with(m)
}

impl Meta {
    fn with(self, m: &Meta) -> Meta {
        Meta {
            flags: m.flags,
            keys: m.keys,
            acl: m.acl,
            tips: m.tips,
            summary: m.summary,
            since: m.since,
            group: m.group,
            complexity: m.complexity,
            ..self
        }
    }
}

/// The `container|sub` rows of a container command.
fn subcommands(name: &str) -> impl Iterator<Item = &'static Meta> + '_ {
    META.iter()
        .filter(move |m| m.name.split_once('|').is_some_and(|(c, _)| c == name))
}

/// Writes a list of simple strings: a set in RESP3, an array in RESP2 (as Redis does).
fn set_of(o: &mut Vec<u8>, v: Version, items: &[&str], status: bool) {
    if v == Version::Resp3 {
        o.extend_from_slice(format!("~{}\r\n", items.len()).as_bytes());
    } else {
        RespWriter::new(o, v).array_len(items.len());
    }
    for i in items {
        if status {
            RespWriter::new(o, v).simple(i);
        } else {
            RespWriter::new(o, v).bulk(i.as_bytes());
        }
    }
}

fn key_spec(o: &mut Vec<u8>, v: Version, k: &KeySpec) {
    RespWriter::new(o, v).map_len(if k.notes.is_empty() { 3 } else { 4 });
    if !k.notes.is_empty() {
        RespWriter::new(o, v).bulk(b"notes");
        RespWriter::new(o, v).bulk(k.notes.as_bytes());
    }
    RespWriter::new(o, v).bulk(b"flags");
    set_of(o, v, k.flags, true);
    RespWriter::new(o, v).bulk(b"begin_search");
    RespWriter::new(o, v).map_len(2);
    RespWriter::new(o, v).bulk(b"type");
    match k.begin {
        Begin::Index(i) => {
            RespWriter::new(o, v).bulk(b"index");
            RespWriter::new(o, v).bulk(b"spec");
            RespWriter::new(o, v).map_len(1);
            RespWriter::new(o, v).bulk(b"index");
            RespWriter::new(o, v).integer(i);
        }
        Begin::Keyword(word, from) => {
            RespWriter::new(o, v).bulk(b"keyword");
            RespWriter::new(o, v).bulk(b"spec");
            RespWriter::new(o, v).map_len(2);
            RespWriter::new(o, v).bulk(b"keyword");
            RespWriter::new(o, v).bulk(word.as_bytes());
            RespWriter::new(o, v).bulk(b"startfrom");
            RespWriter::new(o, v).integer(from);
        }
    }
    RespWriter::new(o, v).bulk(b"find_keys");
    RespWriter::new(o, v).map_len(2);
    RespWriter::new(o, v).bulk(b"type");
    let (kind, fields) = match k.find {
        Find::Range(last, step, limit) => (
            "range",
            [("lastkey", last), ("keystep", step), ("limit", limit)],
        ),
        Find::Keynum(idx, first, step) => (
            "keynum",
            [("keynumidx", idx), ("firstkey", first), ("keystep", step)],
        ),
    };
    RespWriter::new(o, v).bulk(kind.as_bytes());
    RespWriter::new(o, v).bulk(b"spec");
    RespWriter::new(o, v).map_len(3);
    for (name, n) in fields {
        RespWriter::new(o, v).bulk(name.as_bytes());
        RespWriter::new(o, v).integer(n);
    }
}

/// One command's COMMAND INFO entry (10 elements, Redis 7.0's order).
fn info_entry(o: &mut Vec<u8>, v: Version, m: &Meta) {
    RespWriter::new(o, v).array_len(10);
    RespWriter::new(o, v).bulk(m.name.as_bytes());
    RespWriter::new(o, v).integer(m.arity as i64);
    set_of(o, v, m.flags, true);
    RespWriter::new(o, v).integer(m.keys.0);
    RespWriter::new(o, v).integer(m.keys.1);
    RespWriter::new(o, v).integer(m.keys.2);
    set_of(o, v, m.acl, true);
    set_of(o, v, m.tips, false);
    if v == Version::Resp3 {
        o.extend_from_slice(format!("~{}\r\n", m.key_specs.len()).as_bytes());
    } else {
        RespWriter::new(o, v).array_len(m.key_specs.len());
    }
    for k in m.key_specs {
        key_spec(o, v, k);
    }
    let subs: Vec<&Meta> = subcommands(m.name).collect();
    if subs.is_empty() {
        set_of(o, v, &[], false);
    } else {
        RespWriter::new(o, v).array_len(subs.len());
        for s in subs {
            info_entry(o, v, s);
        }
    }
}

/// One command's COMMAND DOCS value (a map of summary, since, group, complexity, and its
/// subcommands' docs).
fn docs_entry(o: &mut Vec<u8>, v: Version, m: &Meta) {
    let subs: Vec<&Meta> = subcommands(m.name).collect();
    let fields = [
        ("summary", m.summary),
        ("since", m.since),
        ("group", m.group),
        ("complexity", m.complexity),
    ];
    let present = fields.iter().filter(|(_, v)| !v.is_empty()).count();
    RespWriter::new(o, v).map_len(present + usize::from(!subs.is_empty()));
    for (k, val) in fields {
        if !val.is_empty() {
            RespWriter::new(o, v).bulk(k.as_bytes());
            RespWriter::new(o, v).bulk(val.as_bytes());
        }
    }
    if !subs.is_empty() {
        RespWriter::new(o, v).bulk(b"subcommands");
        RespWriter::new(o, v).map_len(subs.len());
        for s in subs {
            RespWriter::new(o, v).bulk(s.name.as_bytes());
            docs_entry(o, v, s);
        }
    }
}

const COMMAND_HELP: &[&str] = &[
    "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "(no subcommand)",
    "    Return details about all commands.",
    "COUNT",
    "    Return the total number of commands in this server.",
    "LIST",
    "    Return a list of all commands in this server.",
    "INFO [<command-name> ...]",
    "    Return details about multiple commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "DOCS [<command-name> ...]",
    "    Return documentation details about multiple commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "GETKEYS <full-command>",
    "    Return the keys from a full command.",
    "HELP",
    "    Print this help.",
];

fn lower(a: &[u8]) -> String {
    String::from_utf8_lossy(a).to_ascii_lowercase()
}

/// COMMAND [subcommand ...]
pub fn command(p: &mut Pending, v: Version, a: &[&[u8]]) -> Planned {
    let all = || super::COMMANDS.iter().filter_map(|(n, _)| meta(n));
    let Some(sub) = a.get(1).map(|s| lower(s)) else {
        let metas: Vec<Meta> = all().collect();
        p.immediate(|o| {
            RespWriter::new(o, v).array_len(metas.len());
            for m in &metas {
                info_entry(o, v, m);
            }
        });
        return Planned::Queued;
    };
    match sub.as_str() {
        "count" | "help" if a.len() != 2 => arity(p, v, format!("command|{sub}").as_bytes()),
        "getkeys" if a.len() < 4 => arity(p, v, b"command|getkeys"),
        "count" => {
            let n = super::COMMANDS.len() as i64;
            p.immediate(|o| RespWriter::new(o, v).integer(n));
            Planned::Queued
        }
        "help" => {
            super::help_lines(p, v, COMMAND_HELP);
            Planned::Queued
        }
        "info" => {
            let metas: Vec<Option<Meta>> = if a.len() == 2 {
                all().map(Some).collect()
            } else {
                a[2..].iter().map(|n| meta(&lower(n))).collect()
            };
            p.immediate(|o| {
                RespWriter::new(o, v).array_len(metas.len());
                for m in &metas {
                    match m {
                        Some(m) => info_entry(o, v, m),
                        None => RespWriter::new(o, v).null(),
                    }
                }
            });
            Planned::Queued
        }
        "docs" => {
            let metas: Vec<Meta> = if a.len() == 2 {
                all().collect()
            } else {
                a[2..].iter().filter_map(|n| meta(&lower(n))).collect()
            };
            p.immediate(|o| {
                RespWriter::new(o, v).map_len(metas.len());
                for m in &metas {
                    RespWriter::new(o, v).bulk(m.name.as_bytes());
                    docs_entry(o, v, m);
                }
            });
            Planned::Queued
        }
        "list" => list(p, v, a),
        "getkeys" => getkeys(p, v, &a[2..]),
        _ => {
            let msg = resp::err_unknown_subcommand("COMMAND", a[1]);
            error(p, v, &msg)
        }
    }
}

/// COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN pattern]
fn list(p: &mut Pending, v: Version, a: &[&[u8]]) -> Planned {
    let names: Vec<&'static str> = match a.len() {
        2 => super::COMMANDS.iter().map(|(n, _)| *n).collect(),
        5 if a[2].eq_ignore_ascii_case(b"filterby") => {
            let by = lower(a[3]);
            let arg = a[4];
            let keep = |n: &&'static str| -> bool {
                match by.as_str() {
                    "pattern" => super::config_cmd::glob_match(arg, n.as_bytes()),
                    "aclcat" => meta(n).is_some_and(|m| {
                        m.acl
                            .iter()
                            .any(|c| c.as_bytes()[1..].eq_ignore_ascii_case(arg))
                    }),
                    // No modules: no command belongs to one.
                    _ => false,
                }
            };
            if !matches!(by.as_str(), "pattern" | "aclcat" | "module") {
                return error(p, v, resp::err_syntax());
            }
            super::COMMANDS
                .iter()
                .map(|(n, _)| *n)
                .filter(keep)
                .collect()
        }
        _ => return error(p, v, resp::err_syntax()),
    };
    p.immediate(|o| {
        let mut w = RespWriter::new(o, v);
        w.array_len(names.len());
        for n in names {
            w.bulk(n.as_bytes());
        }
    });
    Planned::Queued
}

/// COMMAND GETKEYS command arg ...: the keys by the command's first/last/step, with Redis 7's
/// errors.
fn getkeys(p: &mut Pending, v: Version, cmd: &[&[u8]]) -> Planned {
    let name = lower(cmd[0]);
    let Some(m) = meta(&name) else {
        return error(p, v, "ERR Invalid command specified");
    };
    let n = cmd.len() as i64;
    let arity_ok = if m.arity >= 0 {
        n == m.arity as i64
    } else {
        n >= -(m.arity as i64)
    };
    if !arity_ok {
        return error(
            p,
            v,
            "ERR Invalid number of arguments specified for command",
        );
    }
    let (first, last, step) = m.keys;
    if first == 0 {
        return error(p, v, "ERR The command has no key arguments");
    }
    let last = if last < 0 { n + last } else { last.min(n - 1) };
    let keys: Vec<&[u8]> = (first..=last)
        .step_by(step.max(1) as usize)
        .filter_map(|i| cmd.get(i as usize).copied())
        .collect();
    p.immediate(|o| {
        let mut w = RespWriter::new(o, v);
        w.array_len(keys.len());
        for k in keys {
            w.bulk(k);
        }
    });
    Planned::Queued
}

/// Redis 7.0.15's metadata for the commands directkv shares with it (from its COMMAND INFO
/// and COMMAND DOCS), then directkv's own.
#[rustfmt::skip]
pub const META: &[Meta] = &[
    Meta { name: "get", arity: 2, flags: &["readonly", "fast"], keys: (1, 1, 1), acl: &["@read", "@string", "@fast"], tips: &[], key_specs: &[KeySpec { notes: "", flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range(0, 1, 0) }], summary: "Get the value of a key", since: "1.0.0", group: "string", complexity: "O(1)" },
    Meta { name: "set", arity: -3, flags: &["write", "denyoom"], keys: (1, 1, 1), acl: &["@write", "@string", "@slow"], tips: &[], key_specs: &[KeySpec { notes: "RW and ACCESS due to the optional `GET` argument", flags: &["RW", "access", "update", "variable_flags"], begin: Begin::Index(1), find: Find::Range(0, 1, 0) }], summary: "Set the string value of a key", since: "1.0.0", group: "string", complexity: "O(1)" },
    Meta { name: "getset", arity: 3, flags: &["write", "denyoom", "fast"], keys: (1, 1, 1), acl: &["@write", "@string", "@fast"], tips: &[], key_specs: &[KeySpec { notes: "", flags: &["RW", "access", "update"], begin: Begin::Index(1), find: Find::Range(0, 1, 0) }], summary: "Set the string value of a key and return its old value", since: "1.0.0", group: "string", complexity: "O(1)" },
    Meta { name: "getdel", arity: 2, flags: &["write", "fast"], keys: (1, 1, 1), acl: &["@write", "@string", "@fast"], tips: &[], key_specs: &[KeySpec { notes: "", flags: &["RW", "access", "delete"], begin: Begin::Index(1), find: Find::Range(0, 1, 0) }], summary: "Get the value of a key and delete the key", since: "6.2.0", group: "string", complexity: "O(1)" },
    Meta { name: "del", arity: -2, flags: &["write"], keys: (1, -1, 1), acl: &["@keyspace", "@write", "@slow"], tips: &["request_policy:multi_shard", "response_policy:agg_sum"], key_specs: &[KeySpec { notes: "", flags: &["RM", "delete"], begin: Begin::Index(1), find: Find::Range(-1, 1, 0) }], summary: "Delete a key", since: "1.0.0", group: "generic", complexity: "O(N) where N is the number of keys that will be removed. When a key to remove holds a value other than a string, the individual complexity for this key is O(M) where M is the number of elements in the list, set, sorted set or hash. Removing a single key that holds a string value is O(1)." },
    Meta { name: "unlink", arity: -2, flags: &["write", "fast"], keys: (1, -1, 1), acl: &["@keyspace", "@write", "@fast"], tips: &["request_policy:multi_shard", "response_policy:agg_sum"], key_specs: &[KeySpec { notes: "", flags: &["RM", "delete"], begin: Begin::Index(1), find: Find::Range(-1, 1, 0) }], summary: "Delete a key asynchronously in another thread. Otherwise it is just as DEL, but non blocking.", since: "4.0.0", group: "generic", complexity: "O(1) for each key removed regardless of its size. Then the command does O(N) work in a different thread in order to reclaim memory, where N is the number of allocations the deleted objects where composed of." },
    Meta { name: "exists", arity: -2, flags: &["readonly", "fast"], keys: (1, -1, 1), acl: &["@keyspace", "@read", "@fast"], tips: &["request_policy:multi_shard", "response_policy:agg_sum"], key_specs: &[KeySpec { notes: "", flags: &["RO"], begin: Begin::Index(1), find: Find::Range(-1, 1, 0) }], summary: "Determine if a key exists", since: "1.0.0", group: "generic", complexity: "O(N) where N is the number of keys to check." },
    Meta { name: "mget", arity: -2, flags: &["readonly", "fast"], keys: (1, -1, 1), acl: &["@read", "@string", "@fast"], tips: &["request_policy:multi_shard"], key_specs: &[KeySpec { notes: "", flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range(-1, 1, 0) }], summary: "Get the values of all the given keys", since: "1.0.0", group: "string", complexity: "O(N) where N is the number of keys to retrieve." },
    Meta { name: "mset", arity: -3, flags: &["write", "denyoom"], keys: (1, -1, 2), acl: &["@write", "@string", "@slow"], tips: &["request_policy:multi_shard", "response_policy:all_succeeded"], key_specs: &[KeySpec { notes: "", flags: &["OW", "update"], begin: Begin::Index(1), find: Find::Range(-1, 2, 0) }], summary: "Set multiple keys to multiple values", since: "1.0.1", group: "string", complexity: "O(N) where N is the number of keys to set." },
    Meta { name: "incr", arity: 2, flags: &["write", "denyoom", "fast"], keys: (1, 1, 1), acl: &["@write", "@string", "@fast"], tips: &[], key_specs: &[KeySpec { notes: "", flags: &["RW", "access", "update"], begin: Begin::Index(1), find: Find::Range(0, 1, 0) }], summary: "Increment the integer value of a key by one", since: "1.0.0", group: "string", complexity: "O(1)" },
    Meta { name: "decr", arity: 2, flags: &["write", "denyoom", "fast"], keys: (1, 1, 1), acl: &["@write", "@string", "@fast"], tips: &[], key_specs: &[KeySpec { notes: "", flags: &["RW", "access", "update"], begin: Begin::Index(1), find: Find::Range(0, 1, 0) }], summary: "Decrement the integer value of a key by one", since: "1.0.0", group: "string", complexity: "O(1)" },
    Meta { name: "incrby", arity: 3, flags: &["write", "denyoom", "fast"], keys: (1, 1, 1), acl: &["@write", "@string", "@fast"], tips: &[], key_specs: &[KeySpec { notes: "", flags: &["RW", "access", "update"], begin: Begin::Index(1), find: Find::Range(0, 1, 0) }], summary: "Increment the integer value of a key by the given amount", since: "1.0.0", group: "string", complexity: "O(1)" },
    Meta { name: "decrby", arity: 3, flags: &["write", "denyoom", "fast"], keys: (1, 1, 1), acl: &["@write", "@string", "@fast"], tips: &[], key_specs: &[KeySpec { notes: "", flags: &["RW", "access", "update"], begin: Begin::Index(1), find: Find::Range(0, 1, 0) }], summary: "Decrement the integer value of a key by the given number", since: "1.0.0", group: "string", complexity: "O(1)" },
    Meta { name: "incrbyfloat", arity: 3, flags: &["write", "denyoom", "fast"], keys: (1, 1, 1), acl: &["@write", "@string", "@fast"], tips: &[], key_specs: &[KeySpec { notes: "", flags: &["RW", "access", "update"], begin: Begin::Index(1), find: Find::Range(0, 1, 0) }], summary: "Increment the float value of a key by the given amount", since: "2.6.0", group: "string", complexity: "O(1)" },
    Meta { name: "strlen", arity: 2, flags: &["readonly", "fast"], keys: (1, 1, 1), acl: &["@read", "@string", "@fast"], tips: &[], key_specs: &[KeySpec { notes: "", flags: &["RO"], begin: Begin::Index(1), find: Find::Range(0, 1, 0) }], summary: "Get the length of the value stored in a key", since: "2.2.0", group: "string", complexity: "O(1)" },
    Meta { name: "append", arity: 3, flags: &["write", "denyoom", "fast"], keys: (1, 1, 1), acl: &["@write", "@string", "@fast"], tips: &[], key_specs: &[KeySpec { notes: "", flags: &["RW", "insert"], begin: Begin::Index(1), find: Find::Range(0, 1, 0) }], summary: "Append a value to a key", since: "2.0.0", group: "string", complexity: "O(1). The amortized time complexity is O(1) assuming the appended value is small and the already present value is of any size, since the dynamic string library used by Redis will double the free space available on every reallocation." },
    Meta { name: "ping", arity: -1, flags: &["fast"], keys: (0, 0, 0), acl: &["@fast", "@connection"], tips: &["request_policy:all_shards", "response_policy:all_succeeded"], key_specs: &[], summary: "Ping the server", since: "1.0.0", group: "connection", complexity: "O(1)" },
    Meta { name: "echo", arity: 2, flags: &["loading", "stale", "fast"], keys: (0, 0, 0), acl: &["@fast", "@connection"], tips: &[], key_specs: &[], summary: "Echo the given string", since: "1.0.0", group: "connection", complexity: "O(1)" },
    Meta { name: "quit", arity: -1, flags: &["noscript", "loading", "stale", "fast", "no_auth", "allow_busy"], keys: (0, 0, 0), acl: &["@fast", "@connection"], tips: &[], key_specs: &[], summary: "Close the connection", since: "1.0.0", group: "connection", complexity: "O(1)" },
    Meta { name: "select", arity: 2, flags: &["loading", "stale", "fast"], keys: (0, 0, 0), acl: &["@fast", "@connection"], tips: &[], key_specs: &[], summary: "Change the selected database for the current connection", since: "1.0.0", group: "connection", complexity: "O(1)" },
    Meta { name: "auth", arity: -2, flags: &["noscript", "loading", "stale", "fast", "no_auth", "allow_busy"], keys: (0, 0, 0), acl: &["@fast", "@connection"], tips: &[], key_specs: &[], summary: "Authenticate to the server", since: "1.0.0", group: "connection", complexity: "O(N) where N is the number of passwords defined for the user" },
    Meta { name: "hello", arity: -1, flags: &["noscript", "loading", "stale", "fast", "no_auth", "allow_busy"], keys: (0, 0, 0), acl: &["@fast", "@connection"], tips: &[], key_specs: &[], summary: "Handshake with Redis", since: "6.0.0", group: "connection", complexity: "O(1)" },
    Meta { name: "command", arity: -1, flags: &["loading", "stale"], keys: (0, 0, 0), acl: &["@slow", "@connection"], tips: &["nondeterministic_output_order"], key_specs: &[], summary: "Get array of Redis command details", since: "2.8.13", group: "server", complexity: "O(N) where N is the total number of Redis commands" },
    Meta { name: "command|count", arity: 2, flags: &["loading", "stale"], keys: (0, 0, 0), acl: &["@slow", "@connection"], tips: &[], key_specs: &[], summary: "Get total number of Redis commands", since: "2.8.13", group: "server", complexity: "O(1)" },
    Meta { name: "command|info", arity: -2, flags: &["loading", "stale"], keys: (0, 0, 0), acl: &["@slow", "@connection"], tips: &["nondeterministic_output_order"], key_specs: &[], summary: "Get array of specific Redis command details, or all when no argument is given.", since: "2.8.13", group: "server", complexity: "O(N) where N is the number of commands to look up" },
    Meta { name: "command|docs", arity: -2, flags: &["loading", "stale"], keys: (0, 0, 0), acl: &["@slow", "@connection"], tips: &["nondeterministic_output_order"], key_specs: &[], summary: "Get array of specific Redis command documentation", since: "7.0.0", group: "server", complexity: "O(N) where N is the number of commands to look up" },
    Meta { name: "command|list", arity: -2, flags: &["loading", "stale"], keys: (0, 0, 0), acl: &["@slow", "@connection"], tips: &["nondeterministic_output_order"], key_specs: &[], summary: "Get an array of Redis command names", since: "7.0.0", group: "server", complexity: "O(N) where N is the total number of Redis commands" },
    Meta { name: "command|getkeys", arity: -4, flags: &["loading", "stale"], keys: (0, 0, 0), acl: &["@slow", "@connection"], tips: &[], key_specs: &[], summary: "Extract keys given a full Redis command", since: "2.8.13", group: "server", complexity: "O(N) where N is the number of arguments to the command" },
    Meta { name: "command|help", arity: 2, flags: &["loading", "stale"], keys: (0, 0, 0), acl: &["@slow", "@connection"], tips: &[], key_specs: &[], summary: "Show helpful text about the different subcommands", since: "5.0.0", group: "server", complexity: "O(1)" },
    Meta { name: "client", arity: -2, flags: &[], keys: (0, 0, 0), acl: &["@slow"], tips: &[], key_specs: &[], summary: "A container for client connection commands", since: "2.4.0", group: "connection", complexity: "Depends on subcommand." },
    Meta { name: "client|id", arity: 2, flags: &["noscript", "loading", "stale"], keys: (0, 0, 0), acl: &["@slow", "@connection"], tips: &[], key_specs: &[], summary: "Returns the client ID for the current connection", since: "5.0.0", group: "connection", complexity: "O(1)" },
    Meta { name: "client|info", arity: 2, flags: &["noscript", "loading", "stale"], keys: (0, 0, 0), acl: &["@slow", "@connection"], tips: &["nondeterministic_output"], key_specs: &[], summary: "Returns information about the current client connection.", since: "6.2.0", group: "connection", complexity: "O(1)" },
    Meta { name: "client|list", arity: -2, flags: &["admin", "noscript", "loading", "stale"], keys: (0, 0, 0), acl: &["@admin", "@slow", "@dangerous", "@connection"], tips: &["nondeterministic_output"], key_specs: &[], summary: "Get the list of client connections", since: "2.4.0", group: "connection", complexity: "O(N) where N is the number of client connections" },
    Meta { name: "client|kill", arity: -3, flags: &["admin", "noscript", "loading", "stale"], keys: (0, 0, 0), acl: &["@admin", "@slow", "@dangerous", "@connection"], tips: &[], key_specs: &[], summary: "Kill the connection of a client", since: "2.4.0", group: "connection", complexity: "O(N) where N is the number of client connections" },
    Meta { name: "client|getname", arity: 2, flags: &["noscript", "loading", "stale"], keys: (0, 0, 0), acl: &["@slow", "@connection"], tips: &[], key_specs: &[], summary: "Get the current connection name", since: "2.6.9", group: "connection", complexity: "O(1)" },
    Meta { name: "client|setname", arity: 3, flags: &["noscript", "loading", "stale"], keys: (0, 0, 0), acl: &["@slow", "@connection"], tips: &[], key_specs: &[], summary: "Set the current connection name", since: "2.6.9", group: "connection", complexity: "O(1)" },
    Meta { name: "client|setinfo", arity: 4, flags: &["noscript", "loading", "stale"], keys: (0, 0, 0), acl: &["@slow", "@connection"], tips: &[], key_specs: &[], summary: "Set client or connection specific info", since: "7.2.0", group: "connection", complexity: "O(1)" },
    Meta { name: "client|no-evict", arity: 3, flags: &["admin", "noscript", "loading", "stale"], keys: (0, 0, 0), acl: &["@admin", "@slow", "@dangerous", "@connection"], tips: &[], key_specs: &[], summary: "Set client eviction mode for the current connection", since: "7.0.0", group: "connection", complexity: "O(1)" },
    Meta { name: "client|help", arity: 2, flags: &["loading", "stale"], keys: (0, 0, 0), acl: &["@slow", "@connection"], tips: &[], key_specs: &[], summary: "Show helpful text about the different subcommands", since: "5.0.0", group: "connection", complexity: "O(1)" },
    Meta { name: "config", arity: -2, flags: &[], keys: (0, 0, 0), acl: &["@slow"], tips: &[], key_specs: &[], summary: "A container for server configuration commands", since: "2.0.0", group: "server", complexity: "Depends on subcommand." },
    Meta { name: "config|get", arity: -3, flags: &["admin", "noscript", "loading", "stale"], keys: (0, 0, 0), acl: &["@admin", "@slow", "@dangerous"], tips: &[], key_specs: &[], summary: "Get the values of configuration parameters", since: "2.0.0", group: "server", complexity: "O(N) when N is the number of configuration parameters provided" },
    Meta { name: "config|set", arity: -4, flags: &["admin", "noscript", "loading", "stale"], keys: (0, 0, 0), acl: &["@admin", "@slow", "@dangerous"], tips: &["request_policy:all_nodes", "response_policy:all_succeeded"], key_specs: &[], summary: "Set configuration parameters to the given values", since: "2.0.0", group: "server", complexity: "O(N) when N is the number of configuration parameters provided" },
    Meta { name: "config|resetstat", arity: 2, flags: &["admin", "noscript", "loading", "stale"], keys: (0, 0, 0), acl: &["@admin", "@slow", "@dangerous"], tips: &[], key_specs: &[], summary: "Reset the stats returned by INFO", since: "2.0.0", group: "server", complexity: "O(1)" },
    Meta { name: "config|help", arity: 2, flags: &["loading", "stale"], keys: (0, 0, 0), acl: &["@slow"], tips: &[], key_specs: &[], summary: "Show helpful text about the different subcommands", since: "5.0.0", group: "server", complexity: "O(1)" },
    Meta { name: "info", arity: -1, flags: &["loading", "stale"], keys: (0, 0, 0), acl: &["@slow", "@dangerous"], tips: &["nondeterministic_output", "request_policy:all_shards", "response_policy:special"], key_specs: &[], summary: "Get information and statistics about the server", since: "1.0.0", group: "server", complexity: "O(1)" },
    Meta { name: "dbsize", arity: 1, flags: &["readonly", "fast"], keys: (0, 0, 0), acl: &["@keyspace", "@read", "@fast"], tips: &["request_policy:all_shards", "response_policy:agg_sum"], key_specs: &[], summary: "Return the number of keys in the selected database", since: "1.0.0", group: "server", complexity: "O(1)" },
    Meta { name: "flushall", arity: -1, flags: &["write"], keys: (0, 0, 0), acl: &["@keyspace", "@write", "@slow", "@dangerous"], tips: &["request_policy:all_shards", "response_policy:all_succeeded"], key_specs: &[], summary: "Remove all keys from all databases", since: "1.0.0", group: "server", complexity: "O(N) where N is the total number of keys in all databases" },
    Meta { name: "flushdb", arity: -1, flags: &["write"], keys: (0, 0, 0), acl: &["@keyspace", "@write", "@slow", "@dangerous"], tips: &["request_policy:all_shards", "response_policy:all_succeeded"], key_specs: &[], summary: "Remove all keys from the current database", since: "1.0.0", group: "server", complexity: "O(N) where N is the number of keys in the selected database" },
    Meta { name: "time", arity: 1, flags: &["loading", "stale", "fast"], keys: (0, 0, 0), acl: &["@fast"], tips: &["nondeterministic_output"], key_specs: &[], summary: "Return the current server time", since: "2.6.0", group: "server", complexity: "O(1)" },
    Meta { name: "lastsave", arity: 1, flags: &["loading", "stale", "fast"], keys: (0, 0, 0), acl: &["@admin", "@fast", "@dangerous"], tips: &["nondeterministic_output"], key_specs: &[], summary: "Get the UNIX time stamp of the last successful save to disk", since: "1.0.0", group: "server", complexity: "O(1)" },
    Meta { name: "shutdown", arity: -1, flags: &["admin", "noscript", "loading", "stale", "no_multi", "allow_busy"], keys: (0, 0, 0), acl: &["@admin", "@slow", "@dangerous"], tips: &[], key_specs: &[], summary: "Synchronously save the dataset to disk and then shut down the server", since: "1.0.0", group: "server", complexity: "O(N) when saving, where N is the total number of keys in all databases when saving data, otherwise O(1)" },
    Meta { name: "dkv.vset", arity: -4, flags: &["write", "denyoom"], keys: (1, 1, 1), acl: &["@write", "@string", "@slow"], tips: &[], key_specs: &[KeySpec { notes: "", flags: &["OW", "update"], begin: Begin::Index(1), find: Find::Range(0, 1, 0) }], summary: "Store a vector of fixed-width elements", since: "0.1.0", group: "directkv", complexity: "O(N) in the value's elements" },
    Meta { name: "dkv.vget", arity: 3, flags: &["readonly"], keys: (1, 1, 1), acl: &["@read", "@string", "@slow"], tips: &[], key_specs: &[KeySpec { notes: "", flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range(0, 1, 0) }], summary: "Read a vector of fixed-width elements", since: "0.1.0", group: "directkv", complexity: "O(N) in the value's elements" },
    Meta { name: "dkv.update", arity: 5, flags: &["write", "denyoom"], keys: (1, 1, 1), acl: &["@write", "@string", "@slow"], tips: &[], key_specs: &[KeySpec { notes: "", flags: &["RW", "access", "update"], begin: Begin::Index(1), find: Find::Range(0, 1, 0) }], summary: "Apply an operation to a scalar value", since: "0.1.0", group: "directkv", complexity: "O(N) in the value's elements" },
    Meta { name: "dkv.updatev", arity: 5, flags: &["write", "denyoom"], keys: (1, 1, 1), acl: &["@write", "@string", "@slow"], tips: &[], key_specs: &[KeySpec { notes: "", flags: &["RW", "access", "update"], begin: Begin::Index(1), find: Find::Range(0, 1, 0) }], summary: "Apply an operation to every element of a vector", since: "0.1.0", group: "directkv", complexity: "O(N) in the value's elements" },
    Meta { name: "dkv.updatevv", arity: -5, flags: &["write", "denyoom"], keys: (1, 1, 1), acl: &["@write", "@string", "@slow"], tips: &[], key_specs: &[KeySpec { notes: "", flags: &["RW", "access", "update"], begin: Begin::Index(1), find: Find::Range(0, 1, 0) }], summary: "Apply an operation element-wise with a vector operand", since: "0.1.0", group: "directkv", complexity: "O(N) in the value's elements" },
    Meta { name: "dkv.reduce", arity: 5, flags: &["readonly"], keys: (1, 1, 1), acl: &["@read", "@string", "@slow"], tips: &[], key_specs: &[KeySpec { notes: "", flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range(0, 1, 0) }], summary: "Reduce a vector to one value", since: "0.1.0", group: "directkv", complexity: "O(N) in the value's elements" },
    Meta { name: "dkv.filter", arity: 5, flags: &["readonly"], keys: (1, 1, 1), acl: &["@read", "@string", "@slow"], tips: &[], key_specs: &[KeySpec { notes: "", flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range(0, 1, 0) }], summary: "Select the elements of a vector that pass a test", since: "0.1.0", group: "directkv", complexity: "O(N) in the value's elements" },
    Meta { name: "dkv.cas", arity: 4, flags: &["write", "denyoom"], keys: (1, 1, 1), acl: &["@write", "@string", "@slow"], tips: &[], key_specs: &[KeySpec { notes: "", flags: &["RW", "access", "update"], begin: Begin::Index(1), find: Find::Range(0, 1, 0) }], summary: "Compare and swap a value", since: "0.1.0", group: "directkv", complexity: "O(N) in the value's elements" },
    Meta { name: "dkv.help", arity: 1, flags: &["loading", "stale"], keys: (0, 0, 0), acl: &["@slow"], tips: &[], key_specs: &[], summary: "Show help about the DKV commands", since: "0.1.0", group: "directkv", complexity: "O(1)" },
    Meta { name: "expire", arity: -3, flags: &["write", "fast"], keys: (1, 1, 1), acl: &["@keyspace", "@write", "@fast"], tips: &[], key_specs: &[KeySpec { notes: "", flags: &["RW", "update"], begin: Begin::Index(1), find: Find::Range(0, 1, 0) }], summary: "Set a key's time to live in seconds", since: "1.0.0", group: "generic", complexity: "O(1)" },
    Meta { name: "pexpire", arity: -3, flags: &["write", "fast"], keys: (1, 1, 1), acl: &["@keyspace", "@write", "@fast"], tips: &[], key_specs: &[KeySpec { notes: "", flags: &["RW", "update"], begin: Begin::Index(1), find: Find::Range(0, 1, 0) }], summary: "Set a key's time to live in milliseconds", since: "2.6.0", group: "generic", complexity: "O(1)" },
    Meta { name: "expireat", arity: -3, flags: &["write", "fast"], keys: (1, 1, 1), acl: &["@keyspace", "@write", "@fast"], tips: &[], key_specs: &[KeySpec { notes: "", flags: &["RW", "update"], begin: Begin::Index(1), find: Find::Range(0, 1, 0) }], summary: "Set the expiration for a key as a UNIX timestamp", since: "1.2.0", group: "generic", complexity: "O(1)" },
    Meta { name: "pexpireat", arity: -3, flags: &["write", "fast"], keys: (1, 1, 1), acl: &["@keyspace", "@write", "@fast"], tips: &[], key_specs: &[KeySpec { notes: "", flags: &["RW", "update"], begin: Begin::Index(1), find: Find::Range(0, 1, 0) }], summary: "Set the expiration for a key as a UNIX timestamp specified in milliseconds", since: "2.6.0", group: "generic", complexity: "O(1)" },
    Meta { name: "ttl", arity: 2, flags: &["readonly", "fast"], keys: (1, 1, 1), acl: &["@keyspace", "@read", "@fast"], tips: &["nondeterministic_output"], key_specs: &[KeySpec { notes: "", flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range(0, 1, 0) }], summary: "Get the time to live for a key in seconds", since: "1.0.0", group: "generic", complexity: "O(1)" },
    Meta { name: "pttl", arity: 2, flags: &["readonly", "fast"], keys: (1, 1, 1), acl: &["@keyspace", "@read", "@fast"], tips: &["nondeterministic_output"], key_specs: &[KeySpec { notes: "", flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range(0, 1, 0) }], summary: "Get the time to live for a key in milliseconds", since: "2.6.0", group: "generic", complexity: "O(1)" },
    Meta { name: "expiretime", arity: 2, flags: &["readonly", "fast"], keys: (1, 1, 1), acl: &["@keyspace", "@read", "@fast"], tips: &[], key_specs: &[KeySpec { notes: "", flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range(0, 1, 0) }], summary: "Get the expiration Unix timestamp for a key", since: "7.0.0", group: "generic", complexity: "O(1)" },
    Meta { name: "pexpiretime", arity: 2, flags: &["readonly", "fast"], keys: (1, 1, 1), acl: &["@keyspace", "@read", "@fast"], tips: &[], key_specs: &[KeySpec { notes: "", flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range(0, 1, 0) }], summary: "Get the expiration Unix timestamp for a key in milliseconds", since: "7.0.0", group: "generic", complexity: "O(1)" },
    Meta { name: "persist", arity: 2, flags: &["write", "fast"], keys: (1, 1, 1), acl: &["@keyspace", "@write", "@fast"], tips: &[], key_specs: &[KeySpec { notes: "", flags: &["RW", "update"], begin: Begin::Index(1), find: Find::Range(0, 1, 0) }], summary: "Remove the expiration from a key", since: "2.2.0", group: "generic", complexity: "O(1)" },
    Meta { name: "setex", arity: 4, flags: &["write", "denyoom"], keys: (1, 1, 1), acl: &["@write", "@string", "@slow"], tips: &[], key_specs: &[KeySpec { notes: "", flags: &["OW", "update"], begin: Begin::Index(1), find: Find::Range(0, 1, 0) }], summary: "Set the value and expiration of a key", since: "2.0.0", group: "string", complexity: "O(1)" },
    Meta { name: "psetex", arity: 4, flags: &["write", "denyoom"], keys: (1, 1, 1), acl: &["@write", "@string", "@slow"], tips: &[], key_specs: &[KeySpec { notes: "", flags: &["OW", "update"], begin: Begin::Index(1), find: Find::Range(0, 1, 0) }], summary: "Set the value and expiration in milliseconds of a key", since: "2.6.0", group: "string", complexity: "O(1)" },
    Meta { name: "getex", arity: -2, flags: &["write", "fast"], keys: (1, 1, 1), acl: &["@write", "@string", "@fast"], tips: &[], key_specs: &[KeySpec { notes: "RW and UPDATE because it changes the TTL", flags: &["RW", "access", "update"], begin: Begin::Index(1), find: Find::Range(0, 1, 0) }], summary: "Get the value of a key and optionally set its expiration", since: "6.2.0", group: "string", complexity: "O(1)" },
    Meta { name: "getrange", arity: 4, flags: &["readonly"], keys: (1, 1, 1), acl: &["@read", "@string", "@slow"], tips: &[], key_specs: &[KeySpec { notes: "", flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range(0, 1, 0) }], summary: "Get a substring of the string stored at a key", since: "2.4.0", group: "string", complexity: "O(N) where N is the length of the returned string. The complexity is ultimately determined by the returned length, but because creating a substring from an existing string is very cheap, it can be considered O(1) for small strings." },
    Meta { name: "substr", arity: 4, flags: &["readonly"], keys: (1, 1, 1), acl: &["@read", "@string", "@slow"], tips: &[], key_specs: &[KeySpec { notes: "", flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range(0, 1, 0) }], summary: "Get a substring of the string stored at a key", since: "1.0.0", group: "string", complexity: "O(N) where N is the length of the returned string. The complexity is ultimately determined by the returned length, but because creating a substring from an existing string is very cheap, it can be considered O(1) for small strings." },
    Meta { name: "setrange", arity: 4, flags: &["write", "denyoom"], keys: (1, 1, 1), acl: &["@write", "@string", "@slow"], tips: &[], key_specs: &[KeySpec { notes: "", flags: &["RW", "update"], begin: Begin::Index(1), find: Find::Range(0, 1, 0) }], summary: "Overwrite part of a string at key starting at the specified offset", since: "2.2.0", group: "string", complexity: "O(1), not counting the time taken to copy the new string in place. Usually, this string is very small so the amortized complexity is O(1). Otherwise, complexity is O(M) with M being the length of the value argument." },
    Meta { name: "getbit", arity: 3, flags: &["readonly", "fast"], keys: (1, 1, 1), acl: &["@read", "@bitmap", "@fast"], tips: &[], key_specs: &[KeySpec { notes: "", flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range(0, 1, 0) }], summary: "Returns the bit value at offset in the string value stored at key", since: "2.2.0", group: "bitmap", complexity: "O(1)" },
    Meta { name: "setbit", arity: 4, flags: &["write", "denyoom"], keys: (1, 1, 1), acl: &["@write", "@bitmap", "@slow"], tips: &[], key_specs: &[KeySpec { notes: "", flags: &["RW", "access", "update"], begin: Begin::Index(1), find: Find::Range(0, 1, 0) }], summary: "Sets or clears the bit at offset in the string value stored at key", since: "2.2.0", group: "bitmap", complexity: "O(1)" },
    Meta { name: "bitcount", arity: -2, flags: &["readonly"], keys: (1, 1, 1), acl: &["@read", "@bitmap", "@slow"], tips: &[], key_specs: &[KeySpec { notes: "", flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range(0, 1, 0) }], summary: "Count set bits in a string", since: "2.6.0", group: "bitmap", complexity: "O(N)" },
    Meta { name: "bitpos", arity: -3, flags: &["readonly"], keys: (1, 1, 1), acl: &["@read", "@bitmap", "@slow"], tips: &[], key_specs: &[KeySpec { notes: "", flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range(0, 1, 0) }], summary: "Find first bit set or clear in a string", since: "2.8.7", group: "bitmap", complexity: "O(N)" },
    Meta { name: "type", arity: 2, flags: &["readonly", "fast"], keys: (1, 1, 1), acl: &["@keyspace", "@read", "@fast"], tips: &[], key_specs: &[KeySpec { notes: "", flags: &["RO"], begin: Begin::Index(1), find: Find::Range(0, 1, 0) }], summary: "Determine the type stored at key", since: "1.0.0", group: "generic", complexity: "O(1)" },
    Meta { name: "touch", arity: -2, flags: &["readonly", "fast"], keys: (1, -1, 1), acl: &["@keyspace", "@read", "@fast"], tips: &["request_policy:multi_shard", "response_policy:agg_sum"], key_specs: &[KeySpec { notes: "", flags: &["RO"], begin: Begin::Index(1), find: Find::Range(-1, 1, 0) }], summary: "Alters the last access time of a key(s). Returns the number of existing keys specified.", since: "3.2.1", group: "generic", complexity: "O(N) where N is the number of keys that will be touched." },
    Meta { name: "rename", arity: 3, flags: &["write"], keys: (1, 2, 1), acl: &["@keyspace", "@write", "@slow"], tips: &[], key_specs: &[KeySpec { notes: "", flags: &["RW", "access", "delete"], begin: Begin::Index(1), find: Find::Range(0, 1, 0) }, KeySpec { notes: "", flags: &["OW", "update"], begin: Begin::Index(2), find: Find::Range(0, 1, 0) }], summary: "Rename a key", since: "1.0.0", group: "generic", complexity: "O(1)" },
    Meta { name: "renamenx", arity: 3, flags: &["write", "fast"], keys: (1, 2, 1), acl: &["@keyspace", "@write", "@fast"], tips: &[], key_specs: &[KeySpec { notes: "", flags: &["RW", "access", "delete"], begin: Begin::Index(1), find: Find::Range(0, 1, 0) }, KeySpec { notes: "", flags: &["OW", "insert"], begin: Begin::Index(2), find: Find::Range(0, 1, 0) }], summary: "Rename a key, only if the new key does not exist", since: "1.0.0", group: "generic", complexity: "O(1)" },
    Meta { name: "copy", arity: -3, flags: &["write", "denyoom"], keys: (1, 2, 1), acl: &["@keyspace", "@write", "@slow"], tips: &[], key_specs: &[KeySpec { notes: "", flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range(0, 1, 0) }, KeySpec { notes: "", flags: &["OW", "update"], begin: Begin::Index(2), find: Find::Range(0, 1, 0) }], summary: "Copy a key", since: "6.2.0", group: "generic", complexity: "O(N) worst case for collections, where N is the number of nested items. O(1) for string values." },
    Meta { name: "msetnx", arity: -3, flags: &["write", "denyoom"], keys: (1, -1, 2), acl: &["@write", "@string", "@slow"], tips: &["request_policy:multi_shard", "response_policy:agg_min"], key_specs: &[KeySpec { notes: "", flags: &["OW", "insert"], begin: Begin::Index(1), find: Find::Range(-1, 2, 0) }], summary: "Set multiple keys to multiple values, only if none of the keys exist", since: "1.0.1", group: "string", complexity: "O(N) where N is the number of keys to set." },
    Meta { name: "object", arity: -2, flags: &[], keys: (0, 0, 0), acl: &["@slow"], tips: &[], key_specs: &[], summary: "A container for object introspection commands", since: "2.2.3", group: "generic", complexity: "Depends on subcommand." },
    Meta { name: "memory", arity: -2, flags: &[], keys: (0, 0, 0), acl: &["@slow"], tips: &[], key_specs: &[], summary: "A container for memory diagnostics commands", since: "4.0.0", group: "server", complexity: "Depends on subcommand." },
    Meta { name: "multi", arity: 1, flags: &["noscript", "loading", "stale", "fast", "allow_busy"], keys: (0, 0, 0), acl: &["@fast", "@transaction"], tips: &[], key_specs: &[], summary: "Mark the start of a transaction block", since: "1.2.0", group: "transactions", complexity: "O(1)" },
    Meta { name: "exec", arity: 1, flags: &["noscript", "loading", "stale", "skip_slowlog"], keys: (0, 0, 0), acl: &["@slow", "@transaction"], tips: &[], key_specs: &[], summary: "Execute all commands issued after MULTI", since: "1.2.0", group: "transactions", complexity: "Depends on commands in the transaction" },
    Meta { name: "discard", arity: 1, flags: &["noscript", "loading", "stale", "fast", "allow_busy"], keys: (0, 0, 0), acl: &["@fast", "@transaction"], tips: &[], key_specs: &[], summary: "Discard all commands issued after MULTI", since: "2.0.0", group: "transactions", complexity: "O(N), when N is the number of queued commands" },
    Meta { name: "watch", arity: -2, flags: &["noscript", "loading", "stale", "fast", "allow_busy"], keys: (1, -1, 1), acl: &["@fast", "@transaction"], tips: &[], key_specs: &[KeySpec { notes: "", flags: &["RO"], begin: Begin::Index(1), find: Find::Range(-1, 1, 0) }], summary: "Watch the given keys to determine execution of the MULTI/EXEC block", since: "2.2.0", group: "transactions", complexity: "O(1) for every key." },
    Meta { name: "unwatch", arity: 1, flags: &["noscript", "loading", "stale", "fast", "allow_busy"], keys: (0, 0, 0), acl: &["@fast", "@transaction"], tips: &[], key_specs: &[], summary: "Forget about all watched keys", since: "2.2.0", group: "transactions", complexity: "O(1)" },
    Meta { name: "setnx", arity: 3, flags: &["write", "denyoom", "fast"], keys: (1, 1, 1), acl: &["@write", "@string", "@fast"], tips: &[], key_specs: &[KeySpec { notes: "", flags: &["OW", "insert"], begin: Begin::Index(1), find: Find::Range(0, 1, 0) }], summary: "Set the value of a key, only if the key does not exist", since: "1.0.0", group: "string", complexity: "O(1)" },
    Meta { name: "scan", arity: -2, flags: &["readonly"], keys: (0, 0, 0), acl: &["@keyspace", "@read", "@slow"], tips: &["nondeterministic_output", "request_policy:special"], key_specs: &[], summary: "Incrementally iterate the keys space", since: "2.8.0", group: "generic", complexity: "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection." },
    Meta { name: "keys", arity: 2, flags: &["readonly"], keys: (0, 0, 0), acl: &["@keyspace", "@read", "@slow", "@dangerous"], tips: &["request_policy:all_shards", "nondeterministic_output_order"], key_specs: &[], summary: "Find all keys matching the given pattern", since: "1.0.0", group: "generic", complexity: "O(N) with N being the number of keys in the database, under the assumption that the key names in the database and the given pattern have limited length." },
    Meta { name: "randomkey", arity: 1, flags: &["readonly"], keys: (0, 0, 0), acl: &["@keyspace", "@read", "@slow"], tips: &["request_policy:all_shards", "nondeterministic_output"], key_specs: &[], summary: "Return a random key from the keyspace", since: "1.0.0", group: "generic", complexity: "O(1)" },
    Meta { name: "save", arity: 1, flags: &["admin", "noscript", "no_async_loading", "no_multi"], keys: (0, 0, 0), acl: &["@admin", "@slow", "@dangerous"], tips: &[], key_specs: &[], summary: "Synchronously saves the database(s) to disk", since: "1.0.0", group: "server", complexity: "O(N) where N is the total number of keys in all databases" },
    Meta { name: "bgsave", arity: -1, flags: &["admin", "noscript", "no_async_loading"], keys: (0, 0, 0), acl: &["@admin", "@slow", "@dangerous"], tips: &[], key_specs: &[], summary: "Asynchronously saves the database(s) to disk", since: "1.0.0", group: "server", complexity: "O(1)" },
];
