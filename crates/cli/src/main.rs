//! The `directkv` binary: `serve`, `check` (persistence files), `bench engine` (in-process),
//! `bench run` (one running target over the network), `bench compare` (directkv, redis-server
//! and memcached started here, side by side), `bench ocsm`, `bench probe` and `bench loopback`.
//!
//! ```text
//!   main.rs      the clap top level and the dispatch
//!   serve.rs     directkv serve
//!   bench/       one file per bench subcommand (see bench/mod.rs)
//!   flags.rs     value parsers shared by several subcommands
//!   check.rs     directkv check DIR [--repair]: the persistence files' state
//! ```

mod bench;
mod check;
mod flags;
mod serve;

use clap::{Parser, Subcommand};

use crate::bench::BenchCmd;
use crate::serve::ServeFlags;

#[derive(Parser)]
#[command(
    name = "directkv",
    version,
    about = "directkv: a KV-Direct style in-memory key-value store"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the server (RESP on --port; Ctrl-C or SIGTERM stops it gracefully).
    Serve(ServeFlags),
    /// Benchmarks.
    Bench {
        #[command(subcommand)]
        what: BenchCmd,
    },
    /// Check a persistence directory: each file's state; --repair truncates damaged logs.
    Check(check::CheckFlags),
}

fn main() {
    let cli = Cli::parse();
    if !matches!(cli.cmd, Cmd::Serve(_)) {
        // `directkv bench ... | head` ends quietly; the server keeps ignoring SIGPIPE.
        directkv_sys::process::default_sigpipe();
    }
    let r = match cli.cmd {
        Cmd::Serve(f) => serve::run(f),
        Cmd::Bench { what } => bench::run(what),
        Cmd::Check(f) => check::run(f),
    };
    if let Err(e) = r {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
