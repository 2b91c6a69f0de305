//! The manifest: which files make up the store. One small text file, `DIR/MANIFEST`, replaced
//! atomically, so a crash at any step of an update leaves either the old or the new one.
//!
//! ```text
//!   directkv-manifest 1
//!   generation 7
//!   shards 2
//!   shard 0 snapshot snap-0000-0000000007.dkvs logs log-0000-0000000007.dkvl
//!   shard 1 snapshot - logs log-0001-0000000001.dkvl log-0001-0000000007.dkvl
//!   crc32c 2fad1209
//! ```
//!
//! A shard's store is its snapshot (`-`: none, an empty store) followed by its logs in order
//! (their Lsns continue one another; a snapshot's header says the Lsn it includes, so records
//! at or before it are skipped). The last line is the crc32c of every byte before it, in hex.
//! Text, because an operator reads it; a checksum, because a damaged manifest must be refused
//! rather than half read (it would drop a shard's files without a word).
//!
//! Update ([`store`]): write `MANIFEST.tmp`, fdatasync it, rename it over `MANIFEST`, fsync
//! the directory. Before the rename the old manifest stands; after it the new one, whole
//! (rename(2) is atomic and the new file's bytes were durable before it); the directory fsync
//! makes the rename itself durable before the caller deletes files only the old one named.
//! A leftover `MANIFEST.tmp` (a crash before the rename) is ignored and overwritten.
//!
//! **A rotation not yet named** ([`unnamed_rotations`]): a server rotating a shard's log for a
//! snapshot writes to the new log before the manifest naming it is stored (the waits for the
//! disk are its sync thread's). A crash in between leaves a log the manifest does not name
//! that continues the shard's chain: recovery names it, and `directkv check` says so.

use std::io;
use std::path::{Path, PathBuf};

use crate::fs::{write_all, Fs};

/// The manifest's file name in the store's directory.
pub const MANIFEST_FILE: &str = "MANIFEST";
/// The name it is written under before it is renamed into place.
pub const MANIFEST_TMP_FILE: &str = "MANIFEST.tmp";
/// The first line's version.
pub const MANIFEST_VERSION: u32 = 1;
/// A manifest larger than this is refused before it is read (limit on what the reader
/// allocates; a store of 1024 shards with a few files each takes under 100 KiB).
pub const MANIFEST_BYTES_MAX: u64 = 1 << 20;
/// Shards a manifest may list (the server's own shard limit is lower).
pub const MANIFEST_SHARDS_MAX: usize = 4096;
/// Bytes of a file name in a manifest.
pub const FILE_NAME_BYTES_MAX: usize = 255;

/// The files of one shard.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShardFiles {
    /// The snapshot file's name in the directory, if the shard has one.
    pub snapshot: Option<String>,
    /// The log files' names, oldest first.
    pub logs: Vec<String>,
}

/// The store's files: one entry per shard, in shard order (the shard count is their number).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Manifest {
    /// Counts updates: each stored manifest has a larger one (files created for an update
    /// carry it in their names, so names never repeat).
    pub generation: u64,
    pub shards: Vec<ShardFiles>,
}

/// What can go wrong with a manifest.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("{path}: {op}: {source}")]
    Io {
        path: PathBuf,
        op: &'static str,
        source: io::Error,
    },
    #[error("{path}: damaged manifest, refused: {reason}")]
    Damaged { path: PathBuf, reason: String },
    #[error("manifest not written: {0}")]
    Invalid(String),
}

/// The name of shard `shard`'s log file created at manifest generation `generation`.
pub fn log_file_name(shard: usize, generation: u64) -> String {
    format!("log-{shard:04}-{generation:010}.dkvl")
}

/// The name of shard `shard`'s snapshot file created at manifest generation `generation`.
pub fn snapshot_file_name(shard: usize, generation: u64) -> String {
    format!("snap-{shard:04}-{generation:010}.dkvs")
}

fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= FILE_NAME_BYTES_MAX
        && name != "-"
        && name != "."
        && name != ".."
        && name.bytes().all(|b| b.is_ascii_graphic() && b != b'/');
    if ok {
        Ok(())
    } else {
        Err(format!("bad file name {name:?}"))
    }
}

impl Manifest {
    /// Checks what `decode` would refuse: a shard count of 1..=MANIFEST_SHARDS_MAX and
    /// plain, distinct file names.
    pub fn validate(&self) -> Result<(), String> {
        if self.shards.is_empty() || self.shards.len() > MANIFEST_SHARDS_MAX {
            return Err(format!(
                "{} shards, expected 1..={MANIFEST_SHARDS_MAX}",
                self.shards.len()
            ));
        }
        let mut seen = std::collections::HashSet::new();
        for s in &self.shards {
            for name in s.snapshot.iter().chain(&s.logs) {
                check_name(name)?;
                if !seen.insert(name) {
                    return Err(format!("file {name} listed twice"));
                }
            }
        }
        Ok(())
    }

    /// The manifest's text, checksum line included.
    pub fn encode(&self) -> String {
        let mut s = format!(
            "directkv-manifest {MANIFEST_VERSION}\ngeneration {}\nshards {}\n",
            self.generation,
            self.shards.len()
        );
        for (i, sh) in self.shards.iter().enumerate() {
            let snap = sh.snapshot.as_deref().unwrap_or("-");
            s.push_str(&format!("shard {i} snapshot {snap} logs"));
            for l in &sh.logs {
                s.push(' ');
                s.push_str(l);
            }
            s.push('\n');
        }
        let crc = crc32c::crc32c(s.as_bytes());
        s.push_str(&format!("crc32c {crc:08x}\n"));
        s
    }

    /// Parses a manifest's bytes; every deviation from what `encode` writes is refused.
    pub fn decode(bytes: &[u8]) -> Result<Manifest, String> {
        let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())?;
        let body_end = text
            .trim_end_matches('\n')
            .rfind('\n')
            .map(|i| i + 1)
            .ok_or("no checksum line")?;
        let (body, last) = text.split_at(body_end);
        let crc = last
            .strip_prefix("crc32c ")
            .and_then(|h| h.strip_suffix('\n'))
            .filter(|h| h.len() == 8 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .ok_or("the last line is not 'crc32c XXXXXXXX'")?;
        if crc32c::crc32c(body.as_bytes()) != crc {
            return Err("checksum mismatch".into());
        }
        let mut lines = body.lines();
        let mut field = |name: &str| -> Result<String, String> {
            lines
                .next()
                .and_then(|l| l.strip_prefix(name))
                .and_then(|l| l.strip_prefix(' '))
                .map(str::to_string)
                .ok_or(format!("expected the '{name}' line"))
        };
        let version = field("directkv-manifest")?;
        if version != MANIFEST_VERSION.to_string() {
            return Err(format!(
                "manifest version {version}, this build reads {MANIFEST_VERSION}"
            ));
        }
        let generation = field("generation")?
            .parse::<u64>()
            .map_err(|_| "bad generation")?;
        let shards = field("shards")?
            .parse::<usize>()
            .map_err(|_| "bad shards")?;
        if shards == 0 || shards > MANIFEST_SHARDS_MAX {
            return Err(format!(
                "{shards} shards, expected 1..={MANIFEST_SHARDS_MAX}"
            ));
        }
        let mut m = Manifest {
            generation,
            shards: Vec::with_capacity(shards),
        };
        for i in 0..shards {
            let l = field("shard")?;
            let mut w = l.split(' ');
            let ok = w.next() == Some(&i.to_string()) && w.next() == Some("snapshot");
            let snap = w
                .next()
                .filter(|_| ok)
                .ok_or(format!("bad line of shard {i}"))?;
            if w.next() != Some("logs") {
                return Err(format!("bad line of shard {i}"));
            }
            m.shards.push(ShardFiles {
                snapshot: (snap != "-").then(|| snap.to_string()),
                logs: w.map(str::to_string).collect(),
            });
        }
        if lines.next().is_some() {
            return Err("lines after the last shard".into());
        }
        m.validate()?;
        Ok(m)
    }
}

/// Reads `dir`'s manifest: None when there is none (a new store); an error when it cannot be
/// read or is damaged.
pub fn load(fs: &dyn Fs, dir: &Path) -> Result<Option<Manifest>, ManifestError> {
    let path = dir.join(MANIFEST_FILE);
    let io = |op| {
        let path = path.clone();
        move |source| ManifestError::Io { path, op, source }
    };
    let file = match fs.open_read(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io("open")(e)),
    };
    let len = file.file_len().map_err(io("stat"))?;
    if len > MANIFEST_BYTES_MAX {
        return Err(ManifestError::Damaged {
            path,
            reason: format!("{len} bytes, over MANIFEST_BYTES_MAX ({MANIFEST_BYTES_MAX})"),
        });
    }
    let mut buf = vec![0u8; len as usize];
    let got = file.read_at(&mut buf, 0).map_err(io("read"))?;
    buf.truncate(got);
    Manifest::decode(&buf)
        .map(Some)
        .map_err(|reason| ManifestError::Damaged { path, reason })
}

/// Replaces `dir`'s manifest with `m` atomically (see the module comment); when it returns Ok,
/// the new manifest is durable.
pub fn store(fs: &dyn Fs, dir: &Path, m: &Manifest) -> Result<(), ManifestError> {
    m.validate().map_err(ManifestError::Invalid)?;
    let tmp = dir.join(MANIFEST_TMP_FILE);
    let path = dir.join(MANIFEST_FILE);
    let io = |p: &Path, op| {
        let path = p.to_path_buf();
        move |source| ManifestError::Io { path, op, source }
    };
    let mut f = fs.create_truncate(&tmp).map_err(io(&tmp, "create"))?;
    let written = write_all(&mut *f, m.encode().as_bytes())
        .map_err(|(_, e)| io(&tmp, "write")(e))
        .and_then(|()| f.sync_data().map_err(io(&tmp, "fdatasync")));
    drop(f);
    if let Err(e) = written {
        // A full disk's partial file takes room a retry needs; the old manifest stands.
        let _ = fs.remove(&tmp);
        return Err(e);
    }
    fs.rename(&tmp, &path).map_err(io(&path, "rename"))?;
    fs.sync_dir(dir).map_err(io(dir, "fsync directory"))?;
    Ok(())
}

/// Logs a snapshot's log rotation left unnamed (a crash before the manifest naming it was
/// stored), as (shard, file name): for each shard whose last log is named as the server names
/// them, the newest `log-i-G` of `names` (the directory's files) after it in name order whose
/// header is shard i's and whose first Lsn is the one after that log's last good record.
/// Anything that cannot be read is left out (recovery reports the named files' damage).
pub fn unnamed_rotations(
    fs: &dyn Fs,
    dir: &Path,
    m: &Manifest,
    names: &[String],
    limits: crate::log::LogLimits,
) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (shard, files) in m.shards.iter().enumerate() {
        let Some(last) = files.logs.last() else {
            continue;
        };
        // `log-SSSS-GGGGGGGGGG.dkvl`: of one shard, the same length, in generation order.
        let own = log_file_name(shard, 0);
        let prefix = &own[..own.len() - "0000000000.dkvl".len()];
        let ours = |n: &str| n.starts_with(prefix) && n.len() == own.len() && n.ends_with(".dkvl");
        if !ours(last) {
            continue;
        }
        let mut later = names
            .iter()
            .filter(|n| ours(n) && n.as_str() > last.as_str() && !files.logs.contains(n))
            .peekable();
        if later.peek().is_none() {
            continue;
        }
        let Ok(end) = crate::log::scan(fs, &dir.join(last), limits, |_, _| Ok(())) else {
            continue;
        };
        let mut later: Vec<&String> = later.collect();
        later.sort();
        let newest = later.into_iter().rev().find(|name| {
            matches!(crate::log::read_header(fs, &dir.join(name)),
                Ok(h) if h.shard as usize == shard && h.first_lsn == end.next_lsn)
        });
        if let Some(name) = newest {
            found.push((shard, name.clone()));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Manifest {
        Manifest {
            generation: 7,
            shards: vec![
                ShardFiles {
                    snapshot: Some(snapshot_file_name(0, 7)),
                    logs: vec![log_file_name(0, 7)],
                },
                ShardFiles {
                    snapshot: None,
                    logs: vec![log_file_name(1, 1), log_file_name(1, 7)],
                },
            ],
        }
    }

    #[test]
    fn a_manifest_round_trips_and_reads_as_documented() {
        let m = sample();
        let text = m.encode();
        assert_eq!(
            text,
            "directkv-manifest 1\ngeneration 7\nshards 2\n\
             shard 0 snapshot snap-0000-0000000007.dkvs logs log-0000-0000000007.dkvl\n\
             shard 1 snapshot - logs log-0001-0000000001.dkvl log-0001-0000000007.dkvl\n\
             crc32c 2fad1209\n"
        );
        assert_eq!(Manifest::decode(text.as_bytes()).unwrap(), m);
    }

    #[test]
    fn every_damaged_byte_and_cut_is_refused() {
        let text = sample().encode().into_bytes();
        for i in 0..text.len() {
            for bit in [0x01u8, 0x20, 0x80] {
                let mut t = text.clone();
                t[i] ^= bit;
                assert!(
                    Manifest::decode(&t).is_err(),
                    "byte {i} ^ {bit:#x} accepted"
                );
            }
        }
        for cut in 0..text.len() {
            assert!(
                Manifest::decode(&text[..cut]).is_err(),
                "cut at {cut} accepted"
            );
        }
    }

    #[test]
    fn bad_names_and_shard_counts_are_not_written() {
        let mut m = sample();
        m.shards[0].logs.push("../etc/passwd".into());
        assert!(m.validate().is_err());
        let mut m = sample();
        m.shards[1].logs[0] = m.shards[0].logs[0].clone();
        assert!(m.validate().is_err());
        assert!(Manifest::default().validate().is_err());
    }
}
