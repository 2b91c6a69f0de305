//! `directkv check DIR [--repair]`: the state of every persistence file in a directory, and
//! the one repair that loses nothing recovery would have kept.
//!
//! Each log (`*.dkvl`) is scanned ([`crate::log::scan`]): clean, a torn tail (which recovery
//! truncates by itself), or corruption (which recovery refuses). Each snapshot (`*.dkvs`) is
//! read whole. The manifest is read and every file it names must exist; files it does not
//! name are listed as leftovers (a crash between creating a file and storing the manifest
//! that names it leaves one; they are harmless), except the new log of a snapshot's rotation
//! a crash cut, which recovery adds to the chain (`manifest::unnamed_rotations`).
//!
//! `--repair` truncates a log at its first bad record: for a torn tail that is what recovery
//! does; for corruption it drops the good records after the damage too (reported), which is
//! the only way to start that keeps every record before it. It takes the directory's lock
//! first, so it never cuts a log a running server is appending to. A damaged snapshot or
//! manifest is not repaired: there is nothing shorter that is still right.

use std::path::{Path, PathBuf};

use crate::fs::{Fs, RealFs};
use crate::lock::DirLock;
use crate::log::{self, LogEnd, LogLimits, LogScan};
use crate::manifest::{self, Manifest};
use crate::snapshot::{self, SnapshotHeader, SnapshotLimits, SnapshotSummary};

/// The state of one file.
#[derive(Debug)]
pub enum FileState {
    Log(LogScan),
    /// The log's header is damaged or the file cannot be read.
    LogUnreadable(String),
    Snapshot(SnapshotHeader, SnapshotSummary),
    SnapshotDamaged(String),
}

impl FileState {
    /// True when recovery would refuse the file.
    pub fn damaged(&self) -> bool {
        match self {
            FileState::Log(s) => matches!(s.end, LogEnd::Corrupt { .. }),
            FileState::LogUnreadable(_) | FileState::SnapshotDamaged(_) => true,
            FileState::Snapshot(..) => false,
        }
    }
}

#[derive(Debug)]
pub struct FileReport {
    pub name: String,
    pub in_manifest: bool,
    /// Not named, but the new log of a snapshot's rotation a crash cut: recovery adopts it.
    pub adoptable: bool,
    pub state: FileState,
    /// What `--repair` did to the file.
    pub repaired: Option<String>,
}

#[derive(Debug)]
pub struct CheckReport {
    pub dir: PathBuf,
    /// The manifest, None when there is none, or why it was refused.
    pub manifest: Result<Option<Manifest>, String>,
    pub files: Vec<FileReport>,
    /// Files the manifest names that are not in the directory.
    pub missing: Vec<String>,
}

impl CheckReport {
    /// True when a server would start on the directory (torn tails included: it truncates
    /// them).
    pub fn healthy(&self) -> bool {
        self.manifest.is_ok()
            && self.missing.is_empty()
            && self
                .files
                .iter()
                .all(|f| !(self.counts(f) && f.state.damaged()))
    }

    /// True when `f` is part of the store: named by the manifest (or adopted by recovery), or
    /// any file when there is no readable manifest to say.
    fn counts(&self, f: &FileReport) -> bool {
        f.in_manifest || f.adoptable || !matches!(self.manifest, Ok(Some(_)))
    }

    /// The report as text, one line per file.
    pub fn render(&self) -> String {
        let mut s = String::new();
        match &self.manifest {
            Ok(Some(m)) => s.push_str(&format!(
                "MANIFEST: generation {}, {} shards\n",
                m.generation,
                m.shards.len()
            )),
            Ok(None) => s.push_str("MANIFEST: none (an empty store)\n"),
            Err(e) => s.push_str(&format!("MANIFEST: DAMAGED: {e}\n")),
        }
        for name in &self.missing {
            s.push_str(&format!("{name}: MISSING (named by the manifest)\n"));
        }
        for f in &self.files {
            let leftover = if f.adoptable {
                " [not in the manifest yet: the new log of a snapshot's rotation a crash cut, which recovery adds to the chain]"
            } else if self.counts(f) {
                ""
            } else {
                " [not in the manifest: a leftover, removed by recovery]"
            };
            s.push_str(&format!("{}: {}{leftover}\n", f.name, describe(&f.state)));
            if let Some(r) = &f.repaired {
                s.push_str(&format!("  repaired: {r}\n"));
            }
        }
        s.push_str(if self.healthy() {
            "state: ok\n"
        } else {
            "state: DAMAGED: a server would refuse to start on this directory\n"
        });
        s
    }
}

fn describe(state: &FileState) -> String {
    match state {
        FileState::Log(s) => {
            let lsns = match s.records {
                0 => format!("none from lsn {}", s.header.first_lsn),
                _ => format!("lsn {}..{}", s.header.first_lsn, s.next_lsn - 1),
            };
            let head = format!(
                "log of shard {}, {} records ({lsns}), last good offset {}",
                s.header.shard, s.records, s.good_bytes
            );
            match &s.end {
                LogEnd::Clean => format!("{head}, clean"),
                LogEnd::TornTail {
                    offset,
                    bytes_dropped,
                } => format!(
                    "{head}, torn tail at offset {offset}: {bytes_dropped} bytes that recovery drops"
                ),
                LogEnd::Corrupt {
                    offset,
                    reason,
                    next_good,
                } => format!(
                    "{head}, CORRUPT at offset {offset} ({reason}; a good record follows at {next_good}); \
                     --repair truncates to {offset}, dropping {} bytes",
                    s.file_bytes - offset
                ),
            }
        }
        FileState::LogUnreadable(e) => format!("log UNREADABLE: {e}"),
        FileState::Snapshot(h, sum) => format!(
            "snapshot of shard {}, lsn {}, {} entries in {} blocks, {} bytes, ok",
            h.shard, h.lsn, sum.entries, sum.blocks, sum.file_bytes
        ),
        FileState::SnapshotDamaged(e) => format!("snapshot DAMAGED: {e}"),
    }
}

fn check_file(fs: &dyn Fs, path: &Path) -> FileState {
    let is_log = path.extension().is_some_and(|e| e == "dkvl");
    if is_log {
        match log::scan(fs, path, LogLimits::default(), |_, _| Ok(())) {
            Ok(s) => FileState::Log(s),
            Err(e) => FileState::LogUnreadable(e.to_string()),
        }
    } else {
        match snapshot::read(fs, path, SnapshotLimits::default(), |_| Ok(())) {
            Ok((h, sum)) => FileState::Snapshot(h, sum),
            Err(e) => FileState::SnapshotDamaged(e.to_string()),
        }
    }
}

/// Checks `dir`; with `repair`, truncates each log at its first bad record (under the
/// directory's lock). Errors: the directory cannot be listed, or (repair) locked.
pub fn check_dir(dir: &Path, repair: bool) -> Result<CheckReport, String> {
    let fs = RealFs;
    let _lock = if repair {
        Some(DirLock::acquire(dir).map_err(|e| e.to_string())?)
    } else {
        None
    };
    let manifest = manifest::load(&fs, dir).map_err(|e| e.to_string());
    let named: Vec<String> = match &manifest {
        Ok(Some(m)) => m
            .shards
            .iter()
            .flat_map(|s| s.snapshot.iter().chain(&s.logs).cloned())
            .collect(),
        _ => Vec::new(),
    };
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.ends_with(".dkvl") || n.ends_with(".dkvs"))
        .collect();
    names.sort();
    // A snapshot's log rotation a crash left unnamed: recovery adopts it.
    let adoptable: Vec<String> = match &manifest {
        Ok(Some(m)) => manifest::unnamed_rotations(&fs, dir, m, &names, LogLimits::default())
            .into_iter()
            .map(|(_, name)| name)
            .collect(),
        _ => Vec::new(),
    };
    let missing = named
        .iter()
        .filter(|n| !names.contains(n))
        .cloned()
        .collect();
    let mut files = Vec::new();
    for name in names {
        let path = dir.join(&name);
        let mut state = check_file(&fs, &path);
        let mut repaired = None;
        if let (true, FileState::Log(s)) = (repair, &state) {
            if s.end != LogEnd::Clean {
                let dropped = s.file_bytes - s.good_bytes;
                let cut = s.good_bytes;
                match fs.truncate(&path, cut) {
                    Ok(()) => {
                        repaired = Some(format!(
                            "truncated to offset {cut} ({} records kept, {dropped} bytes dropped)",
                            s.records
                        ));
                        state = check_file(&fs, &path);
                    }
                    Err(e) => repaired = Some(format!("truncation FAILED: {e}")),
                }
            }
        }
        files.push(FileReport {
            in_manifest: named.contains(&name),
            adoptable: adoptable.contains(&name),
            name,
            state,
            repaired,
        });
    }
    Ok(CheckReport {
        dir: dir.to_path_buf(),
        manifest,
        files,
        missing,
    })
}
