//! The process's open-file limit (`RLIMIT_NOFILE`) and the errors that say it was reached.
//!
//! Every client connection is a file descriptor, so a server's real connection limit is the
//! lower of its own `connections_max` and this limit. The soft limit is often 1024 while the
//! hard limit allows far more; a process may raise its soft limit up to the hard one without
//! privileges, and `directkv serve` does so at start.

use std::io;

/// The soft and hard `RLIMIT_NOFILE` of this process (`u64::MAX` for "unlimited").
pub fn open_files_limit() -> io::Result<(u64, u64)> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the live, writable struct it is given and has
    // no other memory effects.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((as_u64(lim.rlim_cur), as_u64(lim.rlim_max)))
}

/// Sets the soft `RLIMIT_NOFILE` to `soft` (keeping the hard limit); the kernel refuses values
/// above the hard limit or above `fs.nr_open`.
#[allow(clippy::unnecessary_cast)] // as in `as_u64`
pub fn set_open_files_soft_limit(soft: u64) -> io::Result<()> {
    let (_, hard) = open_files_limit()?;
    let lim = libc::rlimit {
        rlim_cur: soft as libc::rlim_t,
        rlim_max: hard as libc::rlim_t,
    };
    // SAFETY: setrlimit reads one rlimit from the live struct it is given and has no other
    // memory effects.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

// rlim_t is u64 on 64-bit Linux, but not on every target libc supports.
#[allow(clippy::unnecessary_cast)]
fn as_u64(v: libc::rlim_t) -> u64 {
    if v == libc::RLIM_INFINITY {
        u64::MAX
    } else {
        v as u64
    }
}

/// File descriptors this process has open now (the entries of `/proc/self/fd`, less the one
/// used to list them).
pub fn open_files_count() -> io::Result<u64> {
    let entries = std::fs::read_dir("/proc/self/fd")?.count() as u64;
    Ok(entries.saturating_sub(1))
}

/// Whether `e` says that no file descriptor was left: for the process (`EMFILE`, its
/// `RLIMIT_NOFILE`) or for the whole system (`ENFILE`).
pub fn is_out_of_files(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_reads_and_can_be_set_to_itself() {
        let (soft, hard) = open_files_limit().unwrap();
        assert!(soft > 0 && soft <= hard);
        set_open_files_soft_limit(soft).unwrap();
        assert_eq!(open_files_limit().unwrap(), (soft, hard));
        if hard != u64::MAX {
            assert!(set_open_files_soft_limit(hard + 1).is_err());
        }
        // stdin, stdout and stderr at least (other tests open and close files meanwhile).
        assert!(open_files_count().unwrap() >= 3);
        assert!(is_out_of_files(&io::Error::from_raw_os_error(libc::EMFILE)));
        assert!(is_out_of_files(&io::Error::from_raw_os_error(libc::ENFILE)));
        assert!(!is_out_of_files(&io::Error::from_raw_os_error(
            libc::ECONNABORTED
        )));
    }
}
