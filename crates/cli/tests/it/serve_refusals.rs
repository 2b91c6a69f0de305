//! `directkv serve` refuses unsafe settings at start, with a message that names them, whether
//! they come from a flag or from the configuration file (issue 19).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `directkv serve args` on ephemeral ports and returns its stderr if it exits by itself
/// (with failure) within the deadline; a server that starts instead is killed and the test fails.
fn serve_refused(args: &[&str]) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_directkv"))
        .args([
            "serve",
            "--port",
            "0",
            "--metrics-port",
            "0",
            "--ocsm-port",
            "0",
        ])
        .args(["--shards", "1", "--memory", "8M", "--appendonly", "no"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("directkv runs");
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("directkv serve {args:?} started instead of refusing");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = child.wait_with_output().unwrap();
    assert!(!status.success(), "{args:?} exited with success");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn an_empty_password_is_refused_from_the_flag_and_the_file() {
    let err = serve_refused(&["--requirepass", ""]);
    assert!(err.contains("requirepass"), "{err}");
    let file =
        std::env::temp_dir().join(format!("directkv-empty-pass-{}.toml", std::process::id()));
    std::fs::write(&file, "requirepass = \"\"\n").unwrap();
    let err = serve_refused(&["--config", file.to_str().unwrap()]);
    let _ = std::fs::remove_file(&file);
    assert!(err.contains("requirepass"), "{err}");
}

#[test]
fn udp_with_a_password_needs_the_acknowledgement() {
    for flag in ["--udp", "--ocsm"] {
        let err = serve_refused(&["--requirepass", "pw", flag, "yes"]);
        assert!(err.contains("--udp-insecure"), "{flag}: {err}");
    }
}
