//! `bench compare`'s persistent targets (issue 22 item 6): `redis-aof` runs the workload with
//! its append-only file in a temporary directory that is gone afterwards; `directkv-aof` runs
//! when this build's `serve` has `--appendonly`, and is listed as skipped with the reason
//! otherwise; a bad `--appendfsync` is refused with the accepted values.

use std::process::{Command, Stdio};

use directkv_bench::net::compare::directkv_has_persistence;
use directkv_testkit::peer::require_program;

const EXE: &str = env!("CARGO_BIN_EXE_directkv");

#[test]
fn redis_aof_and_directkv_aof_targets_run_in_temporary_directories() {
    if require_program("redis-server", "redis-server").is_none() {
        return;
    }
    let child = Command::new(EXE)
        .args([
            "bench",
            "compare",
            "--workload",
            "ycsb-a",
            "--targets",
            "redis-aof,directkv-aof",
            "--appendfsync",
            "always",
            "--keys",
            "5000",
            "--depth",
            "16",
            "--seconds",
            "0.3",
            "--warmup",
            "0",
            "--no-echo-reference",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("directkv runs");
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let v: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).expect("JSON");
    let rows = v["rows"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
    let persists = directkv_has_persistence(std::path::Path::new(EXE));
    if persists {
        assert_eq!(names, ["redis-aof", "directkv-aof"], "{v}");
    } else {
        assert_eq!(names, ["redis-aof"], "{v}");
        let skipped = v["skipped"].to_string();
        assert!(
            skipped.contains("directkv-aof") && skipped.contains("no --appendonly"),
            "{skipped}"
        );
    }
    for row in rows {
        assert!(row["run"]["ops_per_sec"].as_f64().unwrap() > 0.0, "{row}");
        assert_eq!(row["run"]["failed"], 0, "{row}");
        assert_eq!(row["run"]["missed"], 0, "{row}");
        assert_eq!(row["load"]["keys"], 5000, "{row}");
    }
    // Each target's directory was removed after its server stopped.
    let prefix = "directkv-bench-";
    let ours = format!("-{pid}-");
    let left: Vec<String> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix) && n.contains(&ours))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn a_bad_appendfsync_is_refused_with_the_accepted_values() {
    let out = Command::new(EXE)
        .args(["bench", "compare", "--appendfsync", "sometimes"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("always, everysec, no"), "{stderr}");
}
