//! The server and its file-descriptor limit (issue 19 item 8): every client connection is a
//! file, so `RLIMIT_NOFILE` is a connection limit too.
//!
//! At start (`raise_limit`, then `check_room`): the soft limit is raised to the hard one (the
//! usual soft 1024 would cap a server at about a thousand clients), the result is logged at
//! INFO, and when `connections_max` is more than the files left allow, a WARN says the
//! effective figure.
//!
//! At the limit (`Exhausted`, used by the acceptor): `accept` fails at once with EMFILE,
//! whether or not a client waits, so a plain retry loop spins a core while clients hang in the
//! kernel's backlog. Instead the acceptor keeps one spare descriptor open; on EMFILE it closes
//! it, accepts the waiting client with the freed slot, answers
//! `-ERR max number of clients reached` and closes it, then reopens the spare (the trick Redis
//! and nginx use). If the spare cannot be reopened at once (another thread took the slot, or
//! the whole system is out of files: ENFILE), the acceptor sleeps, 1 ms growing to
//! `BACKOFF_MAX`, between attempts. Each episode is logged once at WARN when it starts and once
//! at INFO when a client is served again; every failed accept counts in `accept_errors` and
//! every refused client in `rejected_connections`.
//!
//! ```text
//!   accept ─ok──────────────────────────────────────────────> serve (episode over)
//!      └─EMFILE─> close spare ─> accept ─> reopen spare ─ok─> serve (the files came back)
//!                                             └─fails──> "-ERR max number of clients
//!                                                         reached", close, reopen spare
//! ```

use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::time::Duration;

use directkv_sys::files;

use crate::stats::ServerStats;

/// Files kept free for the server's own use beyond those it holds once started: up to 16
/// metrics connections, the acceptor's spare descriptor, and slack. The start-up check counts
/// them out of the limit before comparing it with `connections_max`.
pub(crate) const OPEN_FILES_HEADROOM: u64 = 32;

/// When the hard limit is "unlimited", the soft one is raised to `connections_max` plus this
/// (an upper estimate of the server's own files: listeners, shard runtimes, metrics).
const OWN_FILES_MAX: u64 = 1024;

/// The longest pause between accepts while no descriptor can be had.
const BACKOFF_MAX: Duration = Duration::from_millis(100);
const BACKOFF_MIN: Duration = Duration::from_millis(1);

/// The line a client refused at the limit gets (the text Redis sends at `maxclients`).
pub(crate) const REFUSED_LINE: &[u8] = b"-ERR max number of clients reached\r\n";

/// Raises the soft `RLIMIT_NOFILE` to the hard limit and logs the outcome at INFO; returns
/// the soft limit in force (None if it cannot be read).
pub(crate) fn raise_limit(connections_max: usize) -> Option<u64> {
    let (soft, hard) = match files::open_files_limit() {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!("cannot read the open files limit (RLIMIT_NOFILE): {e}");
            return None;
        }
    };
    let target = if hard == u64::MAX {
        soft.max(connections_max as u64 + OWN_FILES_MAX)
    } else {
        hard
    };
    if target <= soft {
        tracing::info!("open files limit (RLIMIT_NOFILE): {soft} (hard limit {hard})");
        return Some(soft);
    }
    match files::set_open_files_soft_limit(target) {
        Ok(()) => {
            tracing::info!("open files limit (RLIMIT_NOFILE): raised from {soft} to {target}");
            Some(target)
        }
        Err(e) => {
            tracing::warn!(
                "open files limit (RLIMIT_NOFILE): {soft}; raising it to {target} failed: {e}"
            );
            Some(soft)
        }
    }
}

/// Warns when `connections_max` clients would not fit in the files the limit `soft` leaves,
/// counted once the server holds all its own files; returns the clients that fit.
pub(crate) fn check_room(soft: u64, connections_max: usize) -> Option<u64> {
    let open = files::open_files_count().ok()?;
    let room = soft.saturating_sub(open + OPEN_FILES_HEADROOM);
    if connections_max as u64 > room {
        tracing::warn!(
            "connections_max {connections_max} is more than the open files limit allows: \
             {soft} files, {open} held by the server and {OPEN_FILES_HEADROOM} kept free leave \
             room for about {room} clients; further clients get \"-ERR max number of clients \
             reached\" (raise the limit with ulimit -n or systemd's LimitNOFILE=, or lower \
             connections_max)"
        );
    }
    Some(room)
}

/// A growing pause between failing attempts, reset by a success.
pub(crate) struct Backoff(Duration);

impl Backoff {
    pub(crate) fn new() -> Backoff {
        Backoff(BACKOFF_MIN)
    }

    pub(crate) fn pause(&mut self) {
        std::thread::sleep(self.0);
        self.0 = (self.0 * 2).min(BACKOFF_MAX);
    }

    pub(crate) fn reset(&mut self) {
        self.0 = BACKOFF_MIN;
    }
}

/// The acceptor's state for running out of files: its spare descriptor, its pause, and the
/// current episode (clients refused since it began).
pub(crate) struct Exhausted {
    spare: Option<File>,
    backoff: Backoff,
    episode: Option<u64>,
}

impl Exhausted {
    pub(crate) fn new() -> Exhausted {
        Exhausted {
            spare: open_spare(),
            backoff: Backoff::new(),
            episode: None,
        }
    }

    /// A client was accepted normally: ends an episode (logged) and the pause.
    pub(crate) fn served(&mut self) {
        self.backoff.reset();
        if let Some(refused) = self.episode.take() {
            tracing::info!(
                refused,
                "file descriptors available again: serving new clients ({refused} refused while out of them)"
            );
        }
    }

    /// Handles a failed `accept` on `listener`: returns a client to serve if the files came
    /// back meanwhile; otherwise the waiting client (if any) was refused, or the thread paused.
    pub(crate) fn failed(
        &mut self,
        listener: &TcpListener,
        e: &io::Error,
        stats: &ServerStats,
    ) -> Option<TcpStream> {
        stats.accept_errors.fetch_add(1, Ordering::Relaxed);
        if !files::is_out_of_files(e) {
            // A client that gave up before being accepted is nothing to wait for.
            if e.kind() != io::ErrorKind::ConnectionAborted {
                tracing::warn!("accept failed: {e}");
                self.backoff.pause();
            }
            return None;
        }
        if self.episode.is_none() {
            self.episode = Some(0);
            tracing::warn!(
                "out of file descriptors ({e}): new clients get \"-ERR max number of clients reached\" until some disconnect (raise the limit with ulimit -n or systemd's LimitNOFILE=, or lower connections_max)"
            );
        }
        let Some(spare) = self.spare.take() else {
            self.spare = open_spare();
            if self.spare.is_none() {
                self.backoff.pause();
            }
            return None;
        };
        drop(spare);
        let accepted = listener.accept();
        self.spare = open_spare();
        match accepted {
            Ok((client, _)) if self.spare.is_some() => Some(client),
            Ok((client, _)) => {
                refuse(client);
                stats.rejected_connections.fetch_add(1, Ordering::Relaxed);
                self.episode = self.episode.map(|n| n + 1);
                self.spare = open_spare();
                None
            }
            Err(_) => {
                self.backoff.pause();
                None
            }
        }
    }
}

/// The spare descriptor, if one can be had.
fn open_spare() -> Option<File> {
    File::open("/dev/null").ok()
}

/// Tells a client it cannot be served and closes it, without blocking the acceptor. What it
/// already sent is read first, so the close is a FIN (the client reads the line) rather than a
/// reset.
fn refuse(mut client: TcpStream) {
    if client.set_nonblocking(true).is_err() {
        return;
    }
    let _ = client.write_all(REFUSED_LINE);
    let _ = client.shutdown(std::net::Shutdown::Write);
    let mut sink = [0u8; 512];
    let _ = client.read(&mut sink);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_grows_to_its_cap_and_resets() {
        let mut b = Backoff::new();
        for _ in 0..3 {
            b.pause();
        }
        assert_eq!(b.0, BACKOFF_MIN * 8);
        b.0 = BACKOFF_MAX;
        b.pause();
        assert_eq!(b.0, BACKOFF_MAX);
        b.reset();
        assert_eq!(b.0, BACKOFF_MIN);
    }

    #[test]
    fn a_refused_client_reads_the_line_then_the_close() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        c.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
        let (s, _) = l.accept().unwrap();
        refuse(s);
        let mut got = Vec::new();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c.read_to_end(&mut got).unwrap();
        assert_eq!(got, REFUSED_LINE);
    }
}
