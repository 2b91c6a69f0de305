//! The arena: one contiguous anonymous mapping per engine, sized at start-up.
//!
//! ```text
//!  0                      index_bytes                                   len
//!  +----------------------+----------------------------------------------+
//!  | hash index           | slab region (chained buckets, KV records)    |
//!  | 64-byte buckets      | managed by slab::SlabAllocator, 32 B units   |
//!  +----------------------+----------------------------------------------+
//! ```
//!
//! Goals: no system allocation after start-up, 2 MiB pages where the kernel gives them
//! (`MADV_HUGEPAGE`, since transparent huge pages are usually `madvise`), addresses that fit the
//! index's 31-bit pointers in 32-byte units (so at most 64 GiB).
//! Non-goals: growing or shrinking; sharing between threads (an arena belongs to one shard).

use std::ptr::NonNull;

/// Largest arena the 31-bit, 32-byte-unit pointers of the index can address.
pub const ARENA_BYTES_MAX: usize = 64 << 30;
/// Alignment of the split between index and slab region (the largest slab class, a huge page).
pub const ARENA_ALIGN_BYTES: usize = 2 << 20;

/// An anonymous, zero-filled memory mapping owned by one engine.
pub struct Arena {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is owned exclusively by the Arena; moving it to another thread is fine, it is
// never shared (no Sync).
unsafe impl Send for Arena {}

impl Arena {
    /// Maps `len` bytes (rounded up to `ARENA_ALIGN_BYTES`). Fails if the kernel refuses.
    pub fn new(len: usize) -> std::io::Result<Arena> {
        assert!(
            len > 0 && len <= ARENA_BYTES_MAX,
            "arena size {len} out of range"
        );
        let len = len.div_ceil(ARENA_ALIGN_BYTES) * ARENA_ALIGN_BYTES;
        // Over-map by one huge page so the base can be aligned to 2 MiB (huge pages need it).
        let map_len = len + ARENA_ALIGN_BYTES;
        // SAFETY: anonymous private mapping with no address hint; the result is checked.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let raw = raw as usize;
        let base = raw.div_ceil(ARENA_ALIGN_BYTES) * ARENA_ALIGN_BYTES;
        // SAFETY: both trimmed ranges lie inside the mapping made above and are page aligned.
        unsafe {
            if base > raw {
                libc::munmap(raw as *mut libc::c_void, base - raw);
            }
            let tail = raw + map_len - (base + len);
            if tail > 0 {
                libc::munmap((base + len) as *mut libc::c_void, tail);
            }
            // Advice only: failure (e.g. THP disabled) leaves 4 KiB pages, which is still correct.
            libc::madvise(base as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
        }
        let base = NonNull::new(base as *mut u8).expect("mmap returned null");
        Ok(Arena { base, len })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn base(&self) -> *mut u8 {
        self.base.as_ptr()
    }

    /// Writes one byte per 4 KiB page so the first operations do not pay for page faults.
    pub fn prefault(&mut self) {
        let mut off = 0;
        while off < self.len {
            // SAFETY: off < len, inside the mapping.
            unsafe { std::ptr::write_volatile(self.base.as_ptr().add(off), 0) };
            off += 4096;
        }
    }

    /// Gives the arena's pages back to the kernel: every byte reads as zero again, as after
    /// `new`, and a page is faulted in again (zeroed) when it is next touched. The kernel frees
    /// the resident pages and skips the ranges never touched, so this costs about what was
    /// used, not the arena's length (`Engine::clear`, BENCHMARKS.md "FLUSHALL in place").
    pub fn discard(&mut self) {
        // SAFETY: exactly the range mapped (after trimming) in `new`, a private anonymous
        // mapping; `&mut self` means no slice of it is alive.
        let rc = unsafe {
            libc::madvise(
                self.base.as_ptr() as *mut libc::c_void,
                self.len,
                libc::MADV_DONTNEED,
            )
        };
        if rc != 0 {
            // Never seen for a private anonymous mapping; zeroing by hand keeps the promise.
            self.slice_mut(0, self.len).fill(0);
        }
    }

    /// Hints the CPU to fetch the line at `off` into cache.
    #[inline(always)]
    pub fn prefetch(&self, off: usize) {
        debug_assert!(off < self.len);
        #[cfg(target_arch = "x86_64")]
        // SAFETY: prefetch never faults; the address is inside the mapping anyway.
        unsafe {
            core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
                self.base.as_ptr().add(off) as *const i8,
            );
        }
    }

    /// Bytes `off..off+len` of the arena.
    #[inline(always)]
    pub fn slice(&self, off: usize, len: usize) -> &[u8] {
        assert!(off + len <= self.len);
        // SAFETY: bounds checked above; the arena lives as long as &self.
        unsafe { std::slice::from_raw_parts(self.base.as_ptr().add(off), len) }
    }

    /// Mutable bytes `off..off+len` of the arena.
    #[inline(always)]
    pub fn slice_mut(&mut self, off: usize, len: usize) -> &mut [u8] {
        assert!(off + len <= self.len);
        // SAFETY: bounds checked above; &mut self guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.base.as_ptr().add(off), len) }
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        // SAFETY: exactly the range mapped (after trimming) in `new`.
        unsafe { libc::munmap(self.base.as_ptr() as *mut libc::c_void, self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_aligned_zeroed_memory() {
        let mut a = Arena::new(3 << 20).unwrap();
        assert_eq!(a.len(), 4 << 20);
        assert_eq!(a.base() as usize % ARENA_ALIGN_BYTES, 0);
        assert!(a.slice(0, a.len()).iter().all(|&b| b == 0));
        a.slice_mut(100, 3).copy_from_slice(b"abc");
        assert_eq!(a.slice(100, 3), b"abc");
    }

    #[test]
    fn discard_zeroes_every_byte_and_the_arena_stays_usable() {
        let mut a = Arena::new(4 << 20).unwrap();
        a.slice_mut(0, a.len()).fill(0xab);
        a.discard();
        assert!(a.slice(0, a.len()).iter().all(|&b| b == 0));
        a.slice_mut(5, 2).copy_from_slice(b"xy");
        assert_eq!(a.slice(4, 4), b"\0xy\0");
        // A second discard of an arena barely touched is as good.
        a.discard();
        assert!(a.slice(0, a.len()).iter().all(|&b| b == 0));
    }

    #[test]
    #[should_panic]
    fn out_of_bounds_slice_panics() {
        let a = Arena::new(1 << 20).unwrap();
        let _ = a.slice(a.len() - 1, 2);
    }
}
