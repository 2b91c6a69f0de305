//! Issue 19 item 15: docs/commands.md and the server's command table agree. The table is read
//! from a real server with COMMAND LIST; the document's commands are its `### NAME` headings.
//! Every documented command must also be known to the server (not "unknown command").

use crate::common;

use std::collections::BTreeSet;

use common::{start, Client};
use directkv_proto::resp::Reply;

const DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/commands.md");

/// The lower-cased names of the document's `### NAME` headings (first word).
fn documented() -> BTreeSet<String> {
    let text = std::fs::read_to_string(DOC).unwrap_or_else(|e| panic!("{DOC}: {e}"));
    text.lines()
        .filter_map(|l| l.strip_prefix("### "))
        .filter_map(|h| h.split_whitespace().next())
        .map(|n| n.trim_matches('`').to_ascii_lowercase())
        .collect()
}

fn served(c: &mut Client) -> BTreeSet<String> {
    match c.cmd(&["COMMAND", "LIST"]) {
        Reply::Array(Some(names)) => names
            .into_iter()
            .map(|n| match n {
                Reply::Bulk(Some(b)) => String::from_utf8(b).unwrap().to_ascii_lowercase(),
                other => panic!("COMMAND LIST entry {other:?}"),
            })
            .collect(),
        other => panic!("COMMAND LIST answered {other:?}"),
    }
}

#[test]
fn docs_commands_md_lists_exactly_the_servers_commands() {
    let srv = start(1);
    let mut c = Client::connect(&srv);
    let doc = documented();
    let table = served(&mut c);
    let undocumented: Vec<_> = table.difference(&doc).collect();
    let unserved: Vec<_> = doc.difference(&table).collect();
    assert!(
        undocumented.is_empty() && unserved.is_empty(),
        "served but not in docs/commands.md: {undocumented:?}; documented but not served: {unserved:?}"
    );
    // The table is the server's: each name is a command it knows.
    // (QUIT and SHUTDOWN are left out: they close the connection, SHUTDOWN the server.)
    for name in doc
        .iter()
        .filter(|n| !matches!(n.as_str(), "quit" | "shutdown"))
    {
        if let Reply::Error(e) = c.cmd(&[name.as_str()]) {
            assert!(!e.starts_with("ERR unknown command"), "{name}: {e}");
        }
    }
    srv.stop();
}
