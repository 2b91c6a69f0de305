//! Issue 19 item 10, over real sockets: the defects a new user hits first. `DKV.REDUCE count`
//! on narrow elements, an unknown `DKV.*` command, HELP and unknown subcommands of the commands
//! that have subcommands (texts as Redis 7 writes them), and a scalar update on a vector.
//! DKV numbers come back as decimal bulk strings.

use crate::common;

use common::{bulk, start, Client};
use directkv_proto::resp::Reply;

fn err(text: &str) -> Reply {
    Reply::Error(text.to_string())
}

/// The first line of a HELP reply: Redis 7 answers an array of status lines.
fn help_first_line(r: &Reply) -> String {
    match r {
        Reply::Array(Some(lines)) => {
            assert!(lines.len() >= 2, "HELP too short: {r:?}");
            assert!(
                lines.iter().all(|l| matches!(l, Reply::Simple(_))),
                "HELP lines must be status lines: {r:?}"
            );
            match &lines[0] {
                Reply::Simple(s) => s.clone(),
                _ => unreachable!(),
            }
        }
        other => panic!("HELP must be an array of status lines, got {other:?}"),
    }
}

#[test]
fn reduce_count_works_for_every_integer_width() {
    let srv = start(2);
    let mut c = Client::connect(&srv);
    for elem in ["u8", "u16", "u32", "u64"] {
        let key = format!("cnt:{elem}");
        assert_eq!(
            c.cmd(&["DKV.VSET", &key, elem, "0", "3", "0", "7", "9"]),
            Reply::Simple("OK".into())
        );
        assert_eq!(
            c.cmd(&["DKV.REDUCE", &key, "count", elem, "0"]),
            bulk("5"),
            "count over {elem}"
        );
        assert_eq!(
            c.cmd(&["DKV.REDUCE", &key, "count_nonzero", elem, "10"]),
            bulk("13"),
            "count_nonzero over {elem} starting at 10"
        );
    }
    // The count starts from a u64: a negative or fractional start is said to be one.
    c.cmd(&["DKV.VSET", "cnt:f", "f64", "1.5", "0"]);
    assert_eq!(
        c.cmd(&["DKV.REDUCE", "cnt:f", "count", "f64", "2"]),
        bulk("4")
    );
    assert_eq!(
        c.cmd(&["DKV.REDUCE", "cnt:u8", "count", "u8", "-1"]),
        err("ERR the start of count and count_nonzero is a u64 (a count), not '-1'")
    );
    srv.stop();
}

#[test]
fn unknown_dkv_command_is_an_unknown_command() {
    let srv = start(1);
    let mut c = Client::connect(&srv);
    assert_eq!(
        c.cmd(&["DKV.FOO", "k"]),
        err("ERR unknown command 'DKV.FOO', with args beginning with: 'k' ")
    );
    // A known command with the wrong count keeps the arity error.
    assert_eq!(
        c.cmd(&["DKV.VGET", "k"]),
        err("ERR wrong number of arguments for 'dkv.vget' command")
    );
    srv.stop();
}

#[test]
fn commands_with_subcommands_answer_help_and_redis_unknown_subcommand_text() {
    let srv = start(1);
    let mut c = Client::connect(&srv);
    for cmd in ["CLIENT", "CONFIG", "COMMAND"] {
        let first = help_first_line(&c.cmd(&[cmd, "HELP"]));
        assert_eq!(
            first,
            format!("{cmd} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:")
        );
        let lower = cmd.to_ascii_lowercase();
        help_first_line(&c.cmd(&[&lower, "help"]));
        assert_eq!(
            c.cmd(&[cmd, "NOPE"]),
            err(&format!("ERR unknown subcommand 'NOPE'. Try {cmd} HELP."))
        );
    }
    let first = help_first_line(&c.cmd(&["DKV.HELP"]));
    assert!(first.starts_with("DKV."), "{first}");
    srv.stop();
}

#[test]
fn scalar_update_on_a_vector_says_what_is_wrong() {
    let srv = start(1);
    let mut c = Client::connect(&srv);
    c.cmd(&["DKV.VSET", "vec", "u32", "1", "2", "3"]);
    let r = c.cmd(&["DKV.UPDATE", "vec", "add", "u32", "1"]);
    let Reply::Error(text) = &r else {
        panic!("a scalar update on a 3-element vector must fail, got {r:?}");
    };
    assert!(
        text.contains("3 elements") && text.contains("DKV.UPDATEV"),
        "the error must say the value has 3 u32 elements and point to DKV.UPDATEV: {text}"
    );
    // The vector is untouched.
    assert_eq!(
        c.cmd(&["DKV.VGET", "vec", "u32"]),
        Reply::Array(Some(vec![bulk("1"), bulk("2"), bulk("3")]))
    );
    srv.stop();
}
