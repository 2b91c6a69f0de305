//! Peers: programs and files that a cross-implementation test needs and that the workspace does
//! not build (redis-server, memcached, redis-cli, redis-py, the DejaVu font of the charts).
//!
//! One rule for every such test: a missing peer skips the test, loudly, on a developer's
//! `cargo test`; where peers are required (`scripts/test.sh` exports `DIRECTKV_REQUIRE_PEERS=1`,
//! and CI sets `CI`), a missing peer fails the test. So the README's test command cannot pass
//! without having compared directkv with Redis, while a quick `cargo test` on a bare machine
//! still runs everything else.
//!
//! ```text
//!   require_peer(name, lookup) ── Ok(v) ──────────────────────────────> Some(v)  run
//!                              └─ Err(why) ─ required? ── no ─ "SKIPPED" > None     return
//!                                                       └─ yes ─────────> panic   fail
//! ```

use std::path::PathBuf;

use directkv_sys::process::{find_program, ServerProcess};

/// Set (to anything but "", "0" or "false") to make a missing peer fail its test.
pub const REQUIRE_PEERS_ENV: &str = "DIRECTKV_REQUIRE_PEERS";
/// Set by CI services; counts as `REQUIRE_PEERS_ENV`.
pub const CI_ENV: &str = "CI";

fn is_set(value: Option<std::ffi::OsString>) -> bool {
    value.is_some_and(|v| !v.is_empty() && v != "0" && v != "false")
}

/// Whether a missing peer fails its test (`DIRECTKV_REQUIRE_PEERS` or `CI` set).
pub fn peers_required() -> bool {
    is_set(std::env::var_os(REQUIRE_PEERS_ENV)) || is_set(std::env::var_os(CI_ENV))
}

/// The outcome of looking a peer up: `Some` when it is there; `None` after a loud "SKIPPED"
/// message when it is missing and peers are not required; a panic naming the peer and the
/// reason when it is missing and they are.
pub fn require_peer<T>(peer: &str, lookup: Result<T, String>) -> Option<T> {
    require_peer_if(peers_required(), peer, lookup)
}

/// `require_peer` with the requirement given, for this module's tests.
fn require_peer_if<T>(required: bool, peer: &str, lookup: Result<T, String>) -> Option<T> {
    match lookup {
        Ok(found) => Some(found),
        Err(why) if required => panic!(
            "{peer} is missing ({why}); {REQUIRE_PEERS_ENV} or {CI_ENV} is set, so this test \
             must run: install it (bash scripts/test.sh does) or unset both to skip"
        ),
        Err(why) => {
            eprintln!(
                "\n!!! SKIPPED: {peer} is missing ({why}); set {REQUIRE_PEERS_ENV}=1 to make \
                 this a failure\n"
            );
            None
        }
    }
}

/// `require_peer` of a program on PATH (or in /usr/sbin, /usr/bin): its path, `None` (skipped)
/// or a panic; the message names the Debian `package` to install.
pub fn require_program(program: &str, package: &str) -> Option<PathBuf> {
    require_peer(program, find_program(program, package))
}

/// Starts of redis-server tried: the port can be taken between the probe listener handing it
/// out and redis' bind, and redis then exits.
const REDIS_START_TRIES: usize = 5;

/// A redis-server of its own for a differential test, on a free loopback port, without
/// persistence (stopped by PID when dropped), or `None` when it is not installed and peers are
/// not required (see the top of this file).
pub fn start_redis() -> Option<ServerProcess> {
    require_program("redis-server", "redis-server")?;
    let mut last_error = String::new();
    for _ in 0..REDIS_START_TRIES {
        match ServerProcess::redis(None) {
            Ok(redis) => return Some(redis),
            Err(e) => last_error = e,
        }
    }
    panic!("redis-server did not start: {last_error}");
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOGUS: &str = "directkv-no-such-peer-xyz";

    #[test]
    fn a_present_peer_runs_whatever_the_rule() {
        let sh = find_program("sh", "dash").expect("sh is everywhere");
        assert_eq!(
            require_peer_if(true, "sh", Ok(sh.clone())),
            Some(sh.clone())
        );
        assert_eq!(require_peer_if(false, "sh", Ok(sh.clone())), Some(sh));
    }

    #[test]
    fn a_missing_peer_skips_when_not_required() {
        assert_eq!(
            require_peer_if(false, BOGUS, find_program(BOGUS, "nothing")),
            None
        );
    }

    #[test]
    #[should_panic(expected = "directkv-no-such-peer-xyz is missing")]
    fn a_missing_peer_fails_when_required() {
        require_peer_if(true, BOGUS, find_program(BOGUS, "nothing"));
    }

    #[test]
    fn the_variables_are_read_as_flags() {
        assert!(!is_set(None));
        for off in ["", "0", "false"] {
            assert!(!is_set(Some(off.into())), "{off:?}");
        }
        for on in ["1", "true", "yes"] {
            assert!(is_set(Some(on.into())), "{on:?}");
        }
    }

    /// The rule as the process sees it: `cargo test` of this crate under
    /// `DIRECTKV_REQUIRE_PEERS=1` (as scripts/test.sh runs it) fails here for a missing peer.
    #[test]
    fn the_process_rule_follows_the_variables() {
        let required = peers_required();
        let outcome = std::panic::catch_unwind(|| require_program(BOGUS, "nothing"));
        match outcome {
            Ok(skipped) => {
                assert!(!required, "a required missing peer was skipped");
                assert_eq!(skipped, None);
            }
            Err(_) => assert!(required, "an optional missing peer failed its test"),
        }
    }
}
