//! Socket options the standard library does not expose: buffer sizes and the UDP offloads.
//!
//! Every option is an `int`; a refusal is reported as `false` and leaves the socket as it was,
//! which every caller accepts (a smaller buffer, datagrams one by one).

use crate::Fd;

/// Sets an `int` socket option; false if the kernel refused it.
fn set_int_option(fd: Fd, level: libc::c_int, opt: libc::c_int, value: libc::c_int) -> bool {
    // SAFETY: setsockopt reads size_of::<c_int>() bytes from a live c_int and has no other
    // memory effects; a bad fd is an error return, not undefined behaviour.
    unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            (&value as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        ) == 0
    }
}

/// `bytes` as a socket option value (the kernel takes an `int`).
fn int_bytes(bytes: usize) -> libc::c_int {
    bytes.min(i32::MAX as usize) as libc::c_int
}

/// Asks for receive and send buffers of `bytes` each (the kernel caps the requests at
/// `net.core.{r,w}mem_max`); false if either was refused.
pub fn set_buffer_sizes(fd: Fd, bytes: usize) -> bool {
    let b = int_bytes(bytes);
    let recv = set_int_option(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, b);
    let send = set_int_option(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, b);
    recv && send
}

/// Asks for a receive buffer of `bytes`, past `rmem_max` if the process may (SO_RCVBUFFORCE,
/// root), else up to it (SO_RCVBUF); false if both were refused.
pub fn grow_receive_buffer(fd: Fd, bytes: usize) -> bool {
    let b = int_bytes(bytes);
    set_int_option(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, b)
        || set_int_option(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, b)
}

/// Turns UDP generic receive offload on: equal-size datagrams from one sender may arrive
/// coalesced in one buffer (`mmsg::MmsgRecv` splits them). False if the kernel refuses; the
/// datagrams then arrive one by one.
pub fn enable_udp_gro(fd: Fd) -> bool {
    set_int_option(fd, libc::SOL_UDP, libc::UDP_GRO, 1)
}

/// Sets the socket's UDP generic segmentation size: a send of several times `segment_bytes`
/// leaves as that many datagrams. False if the kernel refuses.
pub fn set_udp_segment(fd: Fd, segment_bytes: usize) -> bool {
    set_int_option(
        fd,
        libc::SOL_UDP,
        libc::UDP_SEGMENT,
        int_bytes(segment_bytes),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn options_apply_to_a_udp_socket_and_fail_on_a_bad_fd() {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(set_buffer_sizes(s.as_raw_fd(), 1 << 20));
        assert!(grow_receive_buffer(s.as_raw_fd(), 1 << 20));
        assert!(!set_buffer_sizes(-1, 1 << 20));
        assert!(!enable_udp_gro(-1));
        assert!(!set_udp_segment(-1, 1000));
    }
}
