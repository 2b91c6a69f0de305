//! Batched UDP system calls: `recvmmsg` with UDP GRO and `sendmmsg` with UDP GSO (the OCSM
//! server's batched paths, and the OCSM load generator).
//!
//! On loopback (and on real NICs) most of a datagram's cost is the trip through the kernel's
//! UDP/IP stack, once per datagram, which `recvmmsg`/`sendmmsg` alone do not remove: they only
//! save the system-call entries. Generic segmentation offload removes it on the send side: one
//! `sendmsg` carries several equal-size replies to the same sender plus a `UDP_SEGMENT` control
//! message, travels the stack once, and is split into separate datagrams at the end (each
//! reply is still its own datagram on the wire, never larger than its request). Generic receive
//! offload is the mirror: with `UDP_GRO` on, the kernel hands over equal-size datagrams from
//! one sender coalesced into one buffer, with their size in a control message, and they are
//! split here.
//!
//! ```text
//!  receive entry i : [ d0 | d1 | d2 | d3 ]  gso_size = |d0|   -> datagrams d0..d3, sender i
//!  send group g    : iov[d0' d1' d2' d3']   UDP_SEGMENT |d0'| -> 4 datagrams to sender i
//! ```
//!
//! Both are best effort: a kernel that refuses `UDP_GRO` delivers datagrams one by one, and one
//! that refuses a segmented send (EIO/EINVAL) gets that group again one datagram at a time,
//! and no more segmented sends.

use std::io;

use crate::Fd;

/// Bytes of a receive buffer by default: a whole coalesced GRO packet (at most 64 KiB).
pub const RECV_ENTRY_BYTES: usize = 65_536;
/// Most datagrams in one segmented send (the kernel's `UDP_MAX_SEGMENTS`).
pub const GSO_SEGMENTS_MAX: usize = 64;
/// Most payload bytes in one segmented send (under the 64 KiB IP packet limit, with room for
/// the headers).
pub const GSO_BYTES_MAX: usize = 65_000;

/// Control-message space for one `int` or `u16` (`CMSG_SPACE(4)`), in u64 words for alignment.
const CTRL_WORDS: usize = 4;

/// The preallocated receive side of `recvmmsg`: buffers, addresses, control space and headers,
/// wired to each other once (the vectors never grow, so the pointers stay valid), and the
/// datagrams of the last call.
pub struct MmsgRecv {
    bufs: Vec<u8>,
    addrs: Vec<libc::sockaddr_storage>,
    iovs: Vec<libc::iovec>,
    ctrl: Vec<[u64; CTRL_WORDS]>,
    hdrs: Vec<libc::mmsghdr>,
    /// (entry, offset, length) of every datagram received by the last call.
    segs: Vec<(u32, u32, u32)>,
    /// Bytes of each receive buffer.
    entry_bytes: usize,
}

impl MmsgRecv {
    /// `entries` receive buffers of `RECV_ENTRY_BYTES`.
    pub fn new(entries: usize) -> Box<MmsgRecv> {
        MmsgRecv::with_entry_bytes(entries, RECV_ENTRY_BYTES)
    }

    /// `entries` receive buffers of `entry_bytes` each (a longer datagram is truncated, as
    /// `recv` into a short buffer would).
    pub fn with_entry_bytes(entries: usize, entry_bytes: usize) -> Box<MmsgRecv> {
        let entry_bytes = entry_bytes.max(1);
        // SAFETY: sockaddr_storage and mmsghdr are plain C data for which all-zero is valid.
        let zero_addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let mut m = Box::new(MmsgRecv {
            bufs: vec![0u8; entries * entry_bytes],
            addrs: vec![zero_addr; entries],
            iovs: Vec::with_capacity(entries),
            ctrl: vec![[0u64; CTRL_WORDS]; entries],
            hdrs: Vec::with_capacity(entries),
            segs: Vec::with_capacity(entries),
            entry_bytes,
        });
        for i in 0..entries {
            let base = m.bufs[i * entry_bytes..].as_mut_ptr();
            m.iovs.push(libc::iovec {
                iov_base: base.cast(),
                iov_len: entry_bytes,
            });
        }
        for i in 0..entries {
            // SAFETY: as above, all-zero is a valid mmsghdr.
            let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
            h.msg_hdr.msg_name = (&mut m.addrs[i] as *mut libc::sockaddr_storage).cast();
            h.msg_hdr.msg_iov = &mut m.iovs[i];
            h.msg_hdr.msg_iovlen = 1;
            h.msg_hdr.msg_control = m.ctrl[i].as_mut_ptr().cast();
            m.hdrs.push(h);
        }
        m
    }

    /// Receives what is waiting without blocking (`MSG_DONTWAIT`).
    pub const DONT_WAIT: i32 = libc::MSG_DONTWAIT;
    /// Blocks for the first packet only (`MSG_WAITFORONE`).
    pub const WAIT_FOR_ONE: i32 = libc::MSG_WAITFORONE;

    /// Receives what is waiting (`MSG_DONTWAIT`: `WouldBlock` if nothing), or blocks for the
    /// first packet (`MSG_WAITFORONE`, up to the socket's read timeout). Returns the number of
    /// datagrams, coalesced ones counted one by one.
    pub fn recv(&mut self, fd: Fd, flags: i32) -> io::Result<usize> {
        for h in &mut self.hdrs {
            h.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as u32;
            h.msg_hdr.msg_controllen = CTRL_WORDS * 8;
            h.msg_hdr.msg_flags = 0;
            h.msg_len = 0;
        }
        // SAFETY: every header points at its own iovec, buffer, address and control space in
        // `self`, which outlive the call and are not moved (sized at creation); the kernel
        // writes at most the lengths given.
        let k = unsafe {
            libc::recvmmsg(
                fd,
                self.hdrs.as_mut_ptr(),
                self.hdrs.len() as u32,
                flags,
                std::ptr::null_mut(),
            )
        };
        if k < 0 {
            return Err(io::Error::last_os_error());
        }
        self.segs.clear();
        for (e, h) in self.hdrs.iter().enumerate().take(k as usize) {
            let len = (h.msg_len as usize).min(self.entry_bytes);
            let seg = gro_segment_size(&h.msg_hdr).filter(|&g| g > 0 && g < len);
            let step = seg.unwrap_or(len.max(1));
            let mut off = 0;
            loop {
                let n = step.min(len - off);
                self.segs.push((e as u32, off as u32, n as u32));
                off += n;
                if off >= len {
                    break;
                }
            }
        }
        Ok(self.segs.len())
    }

    /// Datagrams received by the last call (coalesced ones counted one by one).
    pub fn received(&self) -> usize {
        self.segs.len()
    }

    /// Receive entries (packets, each one datagram or a coalesced run) the last call filled:
    /// as many as the buffers means more may be waiting.
    pub fn packets_received(&self) -> usize {
        // Every filled entry gave at least one datagram, in entry order.
        self.segs.last().map_or(0, |&(e, _, _)| e as usize + 1)
    }

    /// Receive entries (buffers) of this receiver.
    pub fn entries(&self) -> usize {
        self.hdrs.len()
    }

    /// The `i`-th datagram of the last call.
    pub fn datagram(&self, i: usize) -> &[u8] {
        let (e, off, len) = self.segs[i];
        let base = e as usize * self.entry_bytes + off as usize;
        &self.bufs[base..base + len as usize]
    }

    /// The receive entry (one per sender packet) the `i`-th datagram came in.
    pub fn entry(&self, i: usize) -> usize {
        self.segs[i].0 as usize
    }

    /// The sender of receive entry `e`: its address bytes.
    fn addr_bytes(&self, e: usize) -> &[u8] {
        let len = self.hdrs[e].msg_hdr.msg_namelen as usize;
        // SAFETY: sockaddr_storage is plain bytes; `len` is at most its size (the kernel
        // never reports more than the space it was given).
        let all = unsafe {
            std::slice::from_raw_parts(
                (&self.addrs[e] as *const libc::sockaddr_storage).cast::<u8>(),
                std::mem::size_of::<libc::sockaddr_storage>(),
            )
        };
        &all[..len.min(all.len())]
    }
}

/// The `UDP_GRO` segment size of a received packet, if the kernel coalesced it.
fn gro_segment_size(h: &libc::msghdr) -> Option<usize> {
    // SAFETY: the CMSG macros walk the control buffer the kernel filled, bounded by
    // msg_controllen; each header they return lies inside it.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(h);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_UDP && (*c).cmsg_type == libc::UDP_GRO {
                let v = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>());
                return usize::try_from(v).ok();
            }
            c = libc::CMSG_NXTHDR(h, c);
        }
    }
    None
}

/// One `sendmmsg` entry: consecutive replies to one sender.
#[derive(Clone, Copy)]
struct Group {
    first_iov: usize,
    iovs: usize,
    /// Every reply but the last is exactly this long (the GSO segment size).
    seg: usize,
    bytes: usize,
    entry: usize,
}

/// `sendmmsg` headers, reused across bursts; replies to one sender go out as segmented sends.
pub struct MmsgSend {
    iovs: Vec<libc::iovec>,
    groups: Vec<Group>,
    ctrl: Vec<[u64; CTRL_WORDS]>,
    hdrs: Vec<libc::mmsghdr>,
    /// Entries (groups) of the current burst already sent.
    sent: usize,
    /// Segmented sends allowed (until the kernel refuses one).
    gso: bool,
}

impl MmsgSend {
    pub fn new(gso: bool) -> MmsgSend {
        MmsgSend {
            iovs: Vec::new(),
            groups: Vec::new(),
            ctrl: Vec::new(),
            hdrs: Vec::new(),
            sent: 0,
            gso,
        }
    }

    /// Points the headers at the replies to the first `n` datagrams of `rx` (`reply(i)` gives
    /// datagram i's reply, if it gets one), each addressed to its sender, grouping consecutive
    /// replies to one sender into segmented sends when allowed.
    pub fn prepare<'a>(
        &mut self,
        rx: &MmsgRecv,
        n: usize,
        reply: impl Fn(usize) -> Option<&'a [u8]>,
    ) {
        self.iovs.clear();
        self.groups.clear();
        self.hdrs.clear();
        self.sent = 0;
        let mut open = false;
        for i in 0..n {
            let Some(r) = reply(i) else { continue };
            let e = rx.entry(i);
            let joins = open && self.gso && {
                let g = self.groups.last().expect("an open group");
                let same_sender = g.entry == e || rx.addr_bytes(g.entry) == rx.addr_bytes(e);
                same_sender
                    && r.len() <= g.seg
                    && g.iovs < GSO_SEGMENTS_MAX
                    && g.bytes + r.len() <= GSO_BYTES_MAX
            };
            self.iovs.push(libc::iovec {
                iov_base: r.as_ptr() as *mut libc::c_void,
                iov_len: r.len(),
            });
            if joins {
                let g = self.groups.last_mut().expect("an open group");
                g.iovs += 1;
                g.bytes += r.len();
                // A shorter reply can only be a group's last segment.
                open = r.len() == g.seg;
            } else {
                self.groups.push(Group {
                    first_iov: self.iovs.len() - 1,
                    iovs: 1,
                    seg: r.len(),
                    bytes: r.len(),
                    entry: e,
                });
                open = !r.is_empty();
            }
        }
        if self.ctrl.len() < self.groups.len() {
            self.ctrl.resize(self.groups.len(), [0u64; CTRL_WORDS]);
        }
        // The iovec and control vectors are complete and will not move now: point at them.
        for (k, g) in self.groups.iter().enumerate() {
            // SAFETY: all-zero is a valid mmsghdr.
            let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
            h.msg_hdr.msg_name = rx.hdrs[g.entry].msg_hdr.msg_name;
            h.msg_hdr.msg_namelen = rx.hdrs[g.entry].msg_hdr.msg_namelen;
            h.msg_hdr.msg_iov = self.iovs[g.first_iov..].as_mut_ptr();
            h.msg_hdr.msg_iovlen = g.iovs;
            if g.iovs > 1 {
                set_segment_size(&mut h.msg_hdr, &mut self.ctrl[k], g.seg);
            }
            self.hdrs.push(h);
        }
    }

    /// Segmented sends (entries with more than one datagram) in the prepared burst.
    pub fn segmented(&self) -> usize {
        self.groups.iter().filter(|g| g.iovs > 1).count()
    }

    /// Sends what is left of the prepared replies; false if the socket's send buffer is full
    /// (wait for writability and call again). Other refusals drop that entry's replies, as the
    /// network might, except a refused segmented send, which is sent again unsegmented.
    pub fn send_some(&mut self, fd: Fd, flags: i32) -> bool {
        while self.sent < self.hdrs.len() {
            // SAFETY: the headers point at iovecs over the burst's reply buffer, control space
            // in `self` and addresses in the receive side, all alive and unchanged since
            // `prepare` (the caller neither receives nor plans until every reply is sent).
            let k = unsafe {
                libc::sendmmsg(
                    fd,
                    self.hdrs[self.sent..].as_mut_ptr(),
                    (self.hdrs.len() - self.sent) as u32,
                    flags,
                )
            };
            if k > 0 {
                self.sent += k as usize;
                continue;
            }
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::WouldBlock {
                return false;
            }
            let g = self.groups[self.sent];
            if g.iovs > 1 && matches!(e.raw_os_error(), Some(libc::EIO | libc::EINVAL)) {
                self.gso = false;
                self.send_unsegmented(fd, flags);
            }
            self.sent += 1;
        }
        true
    }

    /// Sends group `self.sent` one datagram per `sendmsg` (after the kernel refused GSO); a
    /// datagram the kernel refuses is dropped, as the network might.
    fn send_unsegmented(&mut self, fd: Fd, flags: i32) {
        let g = self.groups[self.sent];
        for j in 0..g.iovs {
            let mut h = self.hdrs[self.sent].msg_hdr;
            // SAFETY: as in send_some; the iovec is one of the group's.
            h.msg_iov = unsafe { self.iovs.as_mut_ptr().add(g.first_iov + j) };
            h.msg_iovlen = 1;
            h.msg_control = std::ptr::null_mut();
            h.msg_controllen = 0;
            // SAFETY: `h` points at live data as described in send_some.
            unsafe { libc::sendmsg(fd, &h, flags & !libc::MSG_DONTWAIT) };
        }
    }
}

/// Adds a `UDP_SEGMENT` control message of `seg` bytes to `h`, in `ctrl`.
fn set_segment_size(h: &mut libc::msghdr, ctrl: &mut [u64; CTRL_WORDS], seg: usize) {
    h.msg_control = ctrl.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE(2) is 24 bytes, within the 32 of `ctrl`, which outlives the send; the
    // header written by CMSG_FIRSTHDR lies at its start.
    unsafe {
        h.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<u16>() as u32) as usize;
        let c = libc::CMSG_FIRSTHDR(h);
        (*c).cmsg_level = libc::SOL_UDP;
        (*c).cmsg_type = libc::UDP_SEGMENT;
        (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<u16>() as u32) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u16>(), seg as u16);
    }
}

/// `sendmmsg` entries of one `send_connected` call, kept on the stack (a load generator calls
/// it in its send loop, which must not allocate); more entries take more calls.
pub const SEND_CONNECTED_ENTRIES_MAX: usize = 64;

/// Sends the first `n` datagrams of `bufs` (each `len` bytes) on a connected socket,
/// `per_entry` datagrams per `sendmmsg` entry (more than one: a segmented send, the socket's
/// UDP_SEGMENT option being `len`); returns how many datagrams the kernel took (a refused entry
/// is skipped, as lost datagrams would be). Allocates nothing.
pub fn send_connected(fd: Fd, bufs: &mut [u8], len: usize, n: usize, per_entry: usize) -> usize {
    let per_entry = per_entry.max(1);
    let n = n.min(bufs.len() / len.max(1));
    let entries = n.div_ceil(per_entry);
    let datagrams_in = |e: usize| per_entry.min(n - e * per_entry);
    let mut taken = 0;
    let mut first = 0;
    while first < entries {
        let count = (entries - first).min(SEND_CONNECTED_ENTRIES_MAX);
        let mut iovs = [libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }; SEND_CONNECTED_ENTRIES_MAX];
        // SAFETY: all-zero is a valid mmsghdr.
        let mut hdrs: [libc::mmsghdr; SEND_CONNECTED_ENTRIES_MAX] = unsafe { std::mem::zeroed() };
        for (j, iov) in iovs.iter_mut().enumerate().take(count) {
            let e = first + j;
            *iov = libc::iovec {
                iov_base: bufs[e * per_entry * len..].as_mut_ptr().cast(),
                iov_len: datagrams_in(e) * len,
            };
        }
        for (h, iov) in hdrs.iter_mut().zip(iovs.iter_mut()).take(count) {
            h.msg_hdr.msg_iov = iov;
            h.msg_hdr.msg_iovlen = 1;
        }
        let mut done = 0;
        while done < count {
            // SAFETY: the headers point at iovecs over `bufs` (each within it: n was capped to
            // whole datagrams of `bufs`), all alive for the call; the socket is connected, so
            // no addresses are needed.
            let k =
                unsafe { libc::sendmmsg(fd, hdrs[done..].as_mut_ptr(), (count - done) as u32, 0) };
            if k <= 0 {
                done += 1;
            } else {
                let from = first + done;
                taken += (from..from + k as usize).map(datagrams_in).sum::<usize>();
                done += k as usize;
            }
        }
        first += count;
    }
    taken
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;
    use std::time::Duration;

    #[test]
    fn datagrams_sent_in_bursts_come_back_in_bursts_with_their_senders() {
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        client.connect(server.local_addr().unwrap()).unwrap();
        server
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let mut bufs: Vec<u8> = (0..40u8).collect();
        assert_eq!(send_connected(client.as_raw_fd(), &mut bufs, 10, 4, 1), 4);
        let mut rx = MmsgRecv::with_entry_bytes(8, 64);
        let mut got = 0;
        while got < 4 {
            got += rx.recv(server.as_raw_fd(), MmsgRecv::WAIT_FOR_ONE).unwrap();
        }
        assert_eq!(rx.datagram(rx.received() - 1).len(), 10);
        // Echo every datagram of the last call to its sender.
        let n = rx.received();
        let mut tx = MmsgSend::new(true);
        let replies: Vec<Vec<u8>> = (0..n).map(|i| rx.datagram(i).to_vec()).collect();
        tx.prepare(&rx, n, |i| Some(&replies[i][..]));
        assert!(tx.send_some(server.as_raw_fd(), 0));
        client
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let mut buf = [0u8; 64];
        assert_eq!(client.recv(&mut buf).unwrap(), 10);
    }

    #[test]
    fn more_entries_than_one_call_holds_are_all_sent() {
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        client.connect(server.local_addr().unwrap()).unwrap();
        let n = SEND_CONNECTED_ENTRIES_MAX + 6;
        let mut bufs = vec![7u8; n * 8];
        assert_eq!(send_connected(client.as_raw_fd(), &mut bufs, 8, n, 1), n);
        server
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let mut buf = [0u8; 64];
        for _ in 0..n {
            assert_eq!(server.recv(&mut buf).unwrap(), 8);
        }
    }
}
