//! A bare epoll set: register sockets for readability and wait for them (the loopback probe's
//! event loop, which measures the kernel's wake-up cost without a runtime in between).

use std::io;

use crate::Fd;

/// An epoll instance, closed on drop.
pub struct Epoll(Fd);

/// One ready event: the token given to `add`.
pub type Event = libc::epoll_event;

impl Epoll {
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: epoll_create1 has no memory effects; the result is checked.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Epoll(fd))
    }

    /// Watches `fd` for readability, reporting `token` when it is.
    pub fn add(&self, fd: Fd, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: token,
        };
        // SAFETY: epoll_ctl reads the live event; both fds are checked by the kernel.
        let r = unsafe { libc::epoll_ctl(self.0, libc::EPOLL_CTL_ADD, fd, &mut ev) };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Stops watching `fd` (best effort: a closed fd has left the set already).
    pub fn remove(&self, fd: Fd) {
        // SAFETY: EPOLL_CTL_DEL ignores the event pointer, which may be null.
        unsafe { libc::epoll_ctl(self.0, libc::EPOLL_CTL_DEL, fd, std::ptr::null_mut()) };
    }

    /// An empty event buffer entry, for the caller's array.
    pub const EMPTY: Event = libc::epoll_event { events: 0, u64: 0 };

    /// The token of a ready event.
    pub fn token(e: &Event) -> u64 {
        e.u64
    }

    /// Waits up to `timeout_ms` (-1: forever) for ready fds; returns how many of `events` were
    /// filled. An interrupted wait returns 0.
    pub fn wait(&self, events: &mut [Event], timeout_ms: i32) -> io::Result<usize> {
        let len = events.len().min(i32::MAX as usize) as i32;
        // SAFETY: the kernel writes at most `len` events into the live slice.
        let n = unsafe { libc::epoll_wait(self.0, events.as_mut_ptr(), len, timeout_ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(0);
            }
            return Err(e);
        }
        Ok(n as usize)
    }
}

impl Drop for Epoll {
    fn drop(&mut self) {
        // SAFETY: the fd is this instance's own, closed once.
        unsafe { libc::close(self.0) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_readable_socket_is_reported_with_its_token() {
        let ep = Epoll::new().unwrap();
        let a = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        ep.add(a.as_raw_fd(), 7).unwrap();
        let mut events = [Epoll::EMPTY; 4];
        assert_eq!(ep.wait(&mut events, 0).unwrap(), 0);
        b.send_to(b"x", a.local_addr().unwrap()).unwrap();
        assert_eq!(ep.wait(&mut events, 1000).unwrap(), 1);
        assert_eq!(Epoll::token(&events[0]), 7);
        ep.remove(a.as_raw_fd());
    }
}
