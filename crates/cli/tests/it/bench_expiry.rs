//! `directkv bench expiry` on a tiny run (the target's run is a minute and a million keys,
//! outside the test budget): it starts its own server, loads keys with and without deadlines,
//! runs YCSB-B past every deadline, finds no expired key returned and no live key missing, and
//! reads the server's expiry counters. The lag verdict is the server's business on a shared
//! machine, so this asserts what the run saw and reported, not the exit status.

use std::process::Command;

const EXE: &str = env!("CARGO_BIN_EXE_directkv");

#[test]
fn a_tiny_expiry_run_checks_every_reply_and_reads_the_lag() {
    let out = Command::new("timeout")
        .arg("120")
        .arg(EXE)
        .args(["bench", "expiry", "--keys", "3000", "--expiring", "0.2"])
        .args(["--window", "1", "--seconds", "2", "--depth", "16", "--json"])
        .output()
        .expect("directkv runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stdout
        .lines()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON report; stdout {stdout}\nstderr {stderr}"));
    let r: serde_json::Value = serde_json::from_str(line).unwrap();
    let n = |k: &str| r[k].as_u64().unwrap_or_else(|| panic!("{k} in {line}"));
    assert_eq!(n("keys"), 3000);
    // About a fifth of the keys got a deadline (which ones is a hash of the index).
    let expiring = n("expiring_keys");
    assert!((450..=750).contains(&expiring), "{line}");
    assert!(n("ops") > 0 && n("gets") > 0, "{line}");
    assert_eq!(n("violations"), 0, "an expired key was returned: {line}");
    assert_eq!(n("unexpected_misses"), 0, "a live key was missing: {line}");
    // Every deadline passed during the run: the server reclaimed them all (a key whose deadline
    // passed while its put was on the way was deleted by the put instead).
    assert_eq!(n("expiring_keys_left"), 0, "{line}");
    assert!(
        n("expired_keys") <= expiring && n("expired_keys") > 0,
        "{line}"
    );
    let lag = r["lag_below"].as_array().unwrap();
    assert_eq!(lag.len(), 4);
    assert!(
        lag[3].as_u64().unwrap() <= n("expired_keys"),
        "cumulative buckets stay below the total: {line}"
    );
    assert_eq!(
        out.status.success(),
        r["passed"].as_bool().unwrap(),
        "{line}"
    );
}
