//! The configuration file as a new user writes it (issue 19 item 14): the same names and
//! units as the flags (`memory = "8M"` as `--memory 8M`, `kv-size` or `kv_size`), the old keys
//! (`memory_bytes`) still accepted, flags over the file, metrics that can be turned off, a
//! misspelt key refused with the key it probably meant, and the shipped example file starting a
//! server as it is. Every server is a real `directkv serve` process, stopped by PID when its
//! guard drops.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use directkv_sys::process::ServerProcess;

const EXE: &str = env!("CARGO_BIN_EXE_directkv");

/// The example configuration shipped in the repository.
fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/directkv.example.toml")
}

/// A configuration file holding `text`, removed when the guard drops.
struct ConfigFile(PathBuf);

impl ConfigFile {
    fn new(name: &str, text: &str) -> ConfigFile {
        let path =
            std::env::temp_dir().join(format!("directkv-{name}-{}.toml", std::process::id()));
        std::fs::write(&path, text).unwrap();
        ConfigFile(path)
    }

    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for ConfigFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// `directkv serve --config FILE FLAGS` on ephemeral ports; its start-up log.
fn served_log(file: &str, flags: &[&str]) -> String {
    let mut all = vec!["--config", file, "--ocsm-port", "0"];
    all.extend(flags);
    let server = ServerProcess::directkv_serve(Path::new(EXE), &all, None)
        .unwrap_or_else(|e| panic!("directkv serve with {file} and {flags:?}: {e}"));
    server.start_log.join("\n")
}

/// The stderr of `directkv serve ARGS`, which must refuse to start within a deadline.
fn refused(args: &[&str]) -> String {
    let mut child = Command::new(EXE)
        .args(["serve", "--port", "0", "--metrics-port", "0"])
        .args(["--appendonly", "no"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("directkv runs");
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("directkv serve {args:?} started instead of refusing");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success());
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn the_file_takes_the_flags_names_and_units() {
    let f = ConfigFile::new(
        "flag-names",
        "shards = 1\nmemory = \"8M\"\nkv-size = 64\nutilization = 0.6\nmetrics = false\ntimeout = 300\nconn_input_bytes_max = \"1M\"\n",
    );
    let log = served_log(f.path(), &[]);
    assert!(log.contains("memory_bytes=8388608"), "{log}");
    assert!(log.contains("metrics are off"), "{log}");
}

#[test]
fn old_keys_still_work_and_flags_override_the_file() {
    let f = ConfigFile::new(
        "old-keys",
        "shards = 1\nmemory_bytes = 8388608\nexpected_kv_bytes = 64\ntarget_utilization = 0.6\n",
    );
    let log = served_log(f.path(), &[]);
    assert!(log.contains("memory_bytes=8388608"), "{log}");
    let log = served_log(
        f.path(),
        &[
            "--memory",
            "16M",
            "--metrics",
            "no",
            "--timeout",
            "5",
            "--connections-max",
            "100",
        ],
    );
    assert!(log.contains("memory_bytes=16777216"), "{log}");
    assert!(log.contains("metrics are off"), "{log}");
}

#[test]
fn a_misspelt_key_is_refused_with_the_key_it_meant() {
    let f = ConfigFile::new("misspelt", "shards = 1\nmemroy = \"8M\"\n");
    let err = refused(&["--config", f.path()]);
    assert!(err.contains("memroy") && err.contains("`memory`"), "{err}");
    let f = ConfigFile::new("bad-size", "memory = \"eight megabytes\"\n");
    let err = refused(&["--config", f.path()]);
    assert!(err.contains("memory"), "{err}");
}

#[test]
fn the_example_file_starts_a_server_as_shipped() {
    let example = example();
    assert!(example.is_file(), "{} is missing", example.display());
    // Its ports are the defaults; the flags move them out of the way of other tests.
    let log = served_log(example.to_str().unwrap(), &["--memory", "16M"]);
    assert!(log.contains("directkv started"), "{log}");
}

/// Issue 20: `--scan-step-buckets` sets `scan_step_buckets` over the file's value; CONFIG GET
/// shows it and CONFIG SET refuses it (it is not live); out of range, start-up is refused.
#[test]
fn scan_step_buckets_has_a_flag_over_the_file() {
    let f = ConfigFile::new(
        "scan-step",
        "shards = 1\nmemory = \"8M\"\nscan_step_buckets = 1000\n",
    );
    let err = refused(&["--config", f.path(), "--scan-step-buckets", "0"]);
    assert!(
        err.contains("scan_step_buckets 0 not in 1..=16777216"),
        "{err}"
    );
    let all = [
        "--config",
        f.path(),
        "--ocsm-port",
        "0",
        "--scan-step-buckets",
        "16",
    ];
    let server = ServerProcess::directkv_serve(Path::new(EXE), &all, None).unwrap();
    let mut c = directkv_testkit::raw::RawClient::connect(server.addr);
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "scan-step-buckets"]),
        b"*2\r\n$17\r\nscan-step-buckets\r\n$2\r\n16\r\n"
    );
    let set = c.cmd(&["CONFIG", "SET", "scan-step-buckets", "32"]);
    let set = String::from_utf8_lossy(&set);
    assert!(set.contains("can't set immutable config"), "{set}");
}
