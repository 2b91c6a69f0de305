//! The lock file: one process at a time owns a store's directory.
//!
//! `DIR/LOCK` is locked with flock(2) (`LOCK_EX | LOCK_NB`, through std's `File::try_lock`, so
//! no `unsafe` here): the kernel drops the lock when the process dies, kill -9 included, so a
//! crash never leaves a stale lock to clean by hand. The owner writes its pid into the file
//! for the message the next comer gets. flock locks belong to the open file description, so a
//! second open in the same process is refused as well (what the tests rely on). Not for
//! directories on NFS, where flock may be emulated per host.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};

/// The lock file's name in the store's directory.
pub const LOCK_FILE: &str = "LOCK";

/// Why the directory could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error(
        "{dir} is in use by another directkv process{}; stop it or choose another --dir",
        holder.map(|p| format!(" (pid {p})")).unwrap_or_default()
    )]
    InUse { dir: PathBuf, holder: Option<u32> },
    #[error("{path}: {op}: {source}")]
    Io {
        path: PathBuf,
        op: &'static str,
        source: io::Error,
    },
}

/// The held lock; dropping it (or the process ending) releases it.
#[derive(Debug)]
pub struct DirLock {
    file: File,
    path: PathBuf,
}

impl DirLock {
    /// Locks `dir` (which must exist) for this process, or says who holds it.
    pub fn acquire(dir: &Path) -> Result<DirLock, LockError> {
        let path = dir.join(LOCK_FILE);
        let io = |op| {
            let path = path.clone();
            move |source| LockError::Io { path, op, source }
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io("open"))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut s = String::new();
                let holder = file
                    .read_to_string(&mut s)
                    .ok()
                    .and_then(|_| s.trim().parse().ok());
                return Err(LockError::InUse {
                    dir: dir.to_path_buf(),
                    holder,
                });
            }
            Err(TryLockError::Error(e)) => return Err(io("flock")(e)),
        }
        file.set_len(0).map_err(io("truncate"))?;
        file.rewind().map_err(io("seek"))?;
        writeln!(file, "{}", std::process::id()).map_err(io("write"))?;
        Ok(DirLock { file, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The lock file (kept open: closing it would release the lock).
    pub fn file(&self) -> &File {
        &self.file
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_owner_is_refused_with_the_holders_pid_until_the_first_lets_go() {
        let d = std::env::temp_dir().join(format!("dkv-lock-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let first = DirLock::acquire(&d).unwrap();
        let err = DirLock::acquire(&d).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("in use by another directkv process")
                && msg.contains(&format!("pid {}", std::process::id())),
            "{msg}"
        );
        drop(first);
        let again = DirLock::acquire(&d).unwrap();
        drop(again);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
