//! `directkv check DIR [--repair]`: reports the state of every persistence file in DIR (the
//! manifest, each log's records, last good offset, torn tail or corruption with its offset,
//! each snapshot) and, with `--repair`, truncates each damaged log to its last good record.
//! The work is `directkv_persist::check`; this file prints it and picks the exit status:
//! 0 when a server would start on DIR (torn tails included: recovery truncates them), 2 when
//! it would refuse, 1 when DIR cannot be checked at all.

use std::path::PathBuf;

use clap::Args;

#[derive(Args)]
pub struct CheckFlags {
    /// The store's directory (serve's --dir).
    pub dir: PathBuf,
    /// Truncate each damaged log at its first bad record (takes the directory's lock: refused
    /// while a server runs on it).
    #[arg(long)]
    pub repair: bool,
}

pub fn run(f: CheckFlags) -> Result<(), String> {
    if !f.dir.is_dir() {
        return Err(format!("{}: not a directory", f.dir.display()));
    }
    let report = directkv_persist::check::check_dir(&f.dir, f.repair)?;
    print!("{}", report.render());
    if !report.healthy() {
        std::process::exit(2);
    }
    Ok(())
}
