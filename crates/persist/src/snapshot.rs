//! Snapshot files: one shard's image as a stream of checksummed blocks of entries.
//!
//! ```text
//!   file    = header(64) block* trailer(32)                       (little-endian)
//!   header  = magic "DKVSNAP\n" | version u32 | shard u32 | created_ms u64 | lsn u64
//!             | cas_next u64 | flags u32 (0) | 16 zero bytes | crc32c u32 (of bytes 0..60)
//!   block   = 'B' | codec u8 (0 none, 1 lz4) | 0u16 | entries u32 | raw_len u32
//!             | stored_len u32 | crc32c u32 (of the 16 bytes before it and the stored bytes)
//!             | stored bytes (the raw entries, compressed when codec is 1)
//!   entry   = flags u8 (1: deadline, 2: item meta) | key_len v | value_len v
//!             | [deadline u64] | [item_flags u32 | cas u64] | key | value   (v: LEB128 u32)
//!   trailer = 'T' | 0 0 0 | blocks u32 | entries u64 | raw_bytes u64 | 0u32
//!             | crc32c u32 (of bytes 0..28)
//! ```
//!
//! `lsn` is the last log record the image includes: recovery loads the image and replays
//! the shard's log records after it. `cas_next` keeps room for memcached's CAS counter
//! (0 until the server has one) and each entry's optional item meta for its flags and CAS
//! value, so adding them changes no byte of the layout. A snapshot is whole or refused: it is
//! written under its final name, fdatasynced with its directory before the manifest names it,
//! and a file without its trailer (a crash while writing) or with any bad block is an error
//! naming the file and offset; the previous snapshot and logs stay in force until the new
//! manifest is stored.
//!
//! Compression: a block is stored compressed (lz4, `lz4_flex`) only when the writer was asked
//! to and the block came out smaller. `docs/persistence.md` has the measurement behind the
//! default ([`Compression::DEFAULT`]).

use std::io;
use std::path::{Path, PathBuf};

use crate::fs::{write_all, Fs, FsFile};

pub const SNAPSHOT_MAGIC: [u8; 8] = *b"DKVSNAP\n";
pub const SNAPSHOT_VERSION: u32 = 1;
pub const SNAPSHOT_HEADER_BYTES: usize = 64;
pub const BLOCK_HEADER_BYTES: usize = 20;
pub const TRAILER_BYTES: usize = 32;
const TAG_BLOCK: u8 = b'B';
const TAG_TRAILER: u8 = b'T';
const ENTRY_DEADLINE: u8 = 1;
const ENTRY_META: u8 = 2;

/// Default of `SnapshotOptions::block_bytes`: raw entry bytes per block the writer aims at
/// (a larger entry gets a block of its own). Large enough that a block header and a
/// checksum per block cost nothing, small enough that a reader's buffer stays small.
pub const SNAPSHOT_BLOCK_BYTES_DEFAULT: usize = 64 << 10;
/// Default of `SnapshotLimits::block_bytes_max`: the raw bytes of one block a reader accepts
/// (it allocates that much for a compressed block, after its checksum passed). Must be at
/// least the largest entry: a key, a value up to the server's `value_len_max` and 30 bytes.
pub const SNAPSHOT_BLOCK_BYTES_MAX_DEFAULT: usize = 1 << 30;

/// How the writer stores blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    /// lz4 block compression, kept only for blocks it makes smaller.
    Lz4,
}

impl Compression {
    /// Off: measured on this project's entries it does not pay (docs/persistence.md).
    pub const DEFAULT: Compression = Compression::None;
}

/// The writer's options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotOptions {
    pub block_bytes: usize,
    pub compression: Compression,
}

impl Default for SnapshotOptions {
    fn default() -> SnapshotOptions {
        SnapshotOptions {
            block_bytes: SNAPSHOT_BLOCK_BYTES_DEFAULT,
            compression: Compression::DEFAULT,
        }
    }
}

/// The reader's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotLimits {
    pub block_bytes_max: usize,
}

impl Default for SnapshotLimits {
    fn default() -> SnapshotLimits {
        SnapshotLimits {
            block_bytes_max: SNAPSHOT_BLOCK_BYTES_MAX_DEFAULT,
        }
    }
}

/// The snapshot's header fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotHeader {
    pub shard: u32,
    /// When the image was taken, in ms since the Unix epoch.
    pub created_ms: u64,
    /// The last log record the image includes (0: none).
    pub lsn: u64,
    /// memcached's next CAS value (0 until the server keeps one).
    pub cas_next: u64,
}

/// memcached's item meta: the client flags and the CAS value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ItemMeta {
    pub flags: u32,
    pub cas: u64,
}

/// One key-value of the image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry<'a> {
    pub key: &'a [u8],
    pub value: &'a [u8],
    /// Absolute deadline in ms (`directkv_engine::NO_DEADLINE`, 0: none).
    pub deadline: u64,
    pub meta: Option<ItemMeta>,
}

/// The trailer's totals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SnapshotSummary {
    pub blocks: u32,
    pub entries: u64,
    /// Bytes of the entries as encoded, before compression.
    pub raw_bytes: u64,
    /// Bytes of the file.
    pub file_bytes: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("{path}: {op}: {source}")]
    Io {
        path: PathBuf,
        op: &'static str,
        source: io::Error,
    },
    #[error("{path}: damaged snapshot at offset {offset}: {reason}")]
    Damaged {
        path: PathBuf,
        offset: u64,
        reason: String,
    },
    #[error("{path}: loading the entry at offset {offset}: {reason}")]
    Load {
        path: PathBuf,
        offset: u64,
        reason: String,
    },
}

/// An entry's fixed part at its largest: flags, two lengths of up to 5 bytes, deadline, meta.
const ENTRY_HEAD_BYTES_MAX: usize = 1 + 5 + 5 + 8 + 12;

/// A length as a varint (7 bits a byte, low first) at `out`'s start; returns the bytes
/// written (1 to 5).
fn put_len_at(out: &mut [u8], len: usize) -> usize {
    let mut v = u32::try_from(len).expect("a key or value is under 4 GiB");
    let mut n = 0;
    while v >= 0x80 {
        out[n] = (v as u8) | 0x80;
        v >>= 7;
        n += 1;
    }
    out[n] = v as u8;
    n + 1
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

impl SnapshotHeader {
    fn encode(&self) -> [u8; SNAPSHOT_HEADER_BYTES] {
        let mut h = [0u8; SNAPSHOT_HEADER_BYTES];
        h[..8].copy_from_slice(&SNAPSHOT_MAGIC);
        h[8..12].copy_from_slice(&SNAPSHOT_VERSION.to_le_bytes());
        h[12..16].copy_from_slice(&self.shard.to_le_bytes());
        h[16..24].copy_from_slice(&self.created_ms.to_le_bytes());
        h[24..32].copy_from_slice(&self.lsn.to_le_bytes());
        h[32..40].copy_from_slice(&self.cas_next.to_le_bytes());
        let crc = crc32c::crc32c(&h[..60]);
        h[60..].copy_from_slice(&crc.to_le_bytes());
        h
    }

    fn decode(h: &[u8]) -> Result<SnapshotHeader, String> {
        if h[..8] != SNAPSHOT_MAGIC {
            return Err("not a directkv snapshot (bad magic)".into());
        }
        if crc32c::crc32c(&h[..60]) != u32_at(h, 60) {
            return Err("snapshot header checksum mismatch".into());
        }
        let version = u32_at(h, 8);
        if version != SNAPSHOT_VERSION {
            return Err(format!(
                "snapshot format version {version}, this build reads {SNAPSHOT_VERSION}"
            ));
        }
        if u32_at(h, 40) != 0 {
            return Err(format!("unknown snapshot flags {:#x}", u32_at(h, 40)));
        }
        Ok(SnapshotHeader {
            shard: u32_at(h, 12),
            created_ms: u64_at(h, 16),
            lsn: u64_at(h, 24),
            cas_next: u64_at(h, 32),
        })
    }
}

/// Writes one snapshot file.
pub struct SnapshotWriter {
    path: PathBuf,
    file: Box<dyn FsFile>,
    opts: SnapshotOptions,
    raw: Vec<u8>,
    raw_entries: u32,
    out: Vec<u8>,
    sum: SnapshotSummary,
}

impl SnapshotWriter {
    /// Creates `path` (it must not exist) and writes the header.
    pub fn create(
        fs: &dyn Fs,
        path: &Path,
        header: SnapshotHeader,
        opts: SnapshotOptions,
    ) -> Result<SnapshotWriter, SnapshotError> {
        let mut file = fs.create_new(path).map_err(io_err(path, "create"))?;
        write_all(&mut *file, &header.encode()).map_err(|(_, e)| io_err(path, "write")(e))?;
        Ok(SnapshotWriter {
            path: path.to_path_buf(),
            file,
            opts,
            raw: Vec::with_capacity(opts.block_bytes),
            raw_entries: 0,
            out: Vec::new(),
            sum: SnapshotSummary {
                file_bytes: SNAPSHOT_HEADER_BYTES as u64,
                ..Default::default()
            },
        })
    }

    /// Adds one entry; a full block is written out.
    pub fn add(&mut self, e: &Entry) -> Result<(), SnapshotError> {
        let size = 30 + e.key.len() + e.value.len();
        if !self.raw.is_empty() && self.raw.len() + size > self.opts.block_bytes {
            self.flush_block()?;
        }
        // The fixed part is put together on the stack: one reserve and three copies per
        // entry instead of a capacity check per field.
        let mut head = [0u8; ENTRY_HEAD_BYTES_MAX];
        head[0] = if e.deadline != 0 { ENTRY_DEADLINE } else { 0 }
            | if e.meta.is_some() { ENTRY_META } else { 0 };
        let mut n = 1;
        n += put_len_at(&mut head[n..], e.key.len());
        n += put_len_at(&mut head[n..], e.value.len());
        if e.deadline != 0 {
            head[n..n + 8].copy_from_slice(&e.deadline.to_le_bytes());
            n += 8;
        }
        if let Some(m) = e.meta {
            head[n..n + 4].copy_from_slice(&m.flags.to_le_bytes());
            head[n + 4..n + 12].copy_from_slice(&m.cas.to_le_bytes());
            n += 12;
        }
        self.raw.reserve(n + e.key.len() + e.value.len());
        self.raw.extend_from_slice(&head[..n]);
        self.raw.extend_from_slice(e.key);
        self.raw.extend_from_slice(e.value);
        self.raw_entries += 1;
        Ok(())
    }

    fn flush_block(&mut self) -> Result<(), SnapshotError> {
        if self.raw.is_empty() {
            return Ok(());
        }
        self.out.clear();
        self.out.resize(BLOCK_HEADER_BYTES, 0);
        let mut codec = 0u8;
        if self.opts.compression == Compression::Lz4 {
            let packed = lz4_flex::block::compress(&self.raw);
            if packed.len() < self.raw.len() {
                codec = 1;
                self.out.extend_from_slice(&packed);
            }
        }
        if codec == 0 {
            self.out.extend_from_slice(&self.raw);
        }
        // An entry is under 4 GiB (engine limits) and a block passes `block_bytes` by at most
        // one entry, so a block's sizes fit their u32 fields for any sane `block_bytes`.
        assert!(
            self.raw.len() <= u32::MAX as usize,
            "snapshot block over 4 GiB"
        );
        let stored = (self.out.len() - BLOCK_HEADER_BYTES) as u32;
        let h = &mut self.out[..BLOCK_HEADER_BYTES];
        h[0] = TAG_BLOCK;
        h[1] = codec;
        h[4..8].copy_from_slice(&self.raw_entries.to_le_bytes());
        h[8..12].copy_from_slice(&(self.raw.len() as u32).to_le_bytes());
        h[12..16].copy_from_slice(&stored.to_le_bytes());
        let mut crc = crc32c::crc32c(&self.out[..16]);
        crc = crc32c::crc32c_append(crc, &self.out[BLOCK_HEADER_BYTES..]);
        self.out[16..20].copy_from_slice(&crc.to_le_bytes());
        write_all(&mut *self.file, &self.out).map_err(|(_, e)| io_err(&self.path, "write")(e))?;
        self.sum.blocks += 1;
        self.sum.entries += u64::from(self.raw_entries);
        self.sum.raw_bytes += self.raw.len() as u64;
        self.sum.file_bytes += self.out.len() as u64;
        self.raw.clear();
        self.raw_entries = 0;
        Ok(())
    }

    /// Writes the last block and the trailer, and makes the file and its name durable.
    pub fn finish(mut self, fs: &dyn Fs) -> Result<SnapshotSummary, SnapshotError> {
        self.flush_block()?;
        let mut t = [0u8; TRAILER_BYTES];
        t[0] = TAG_TRAILER;
        t[4..8].copy_from_slice(&self.sum.blocks.to_le_bytes());
        t[8..16].copy_from_slice(&self.sum.entries.to_le_bytes());
        t[16..24].copy_from_slice(&self.sum.raw_bytes.to_le_bytes());
        let crc = crc32c::crc32c(&t[..28]);
        t[28..].copy_from_slice(&crc.to_le_bytes());
        let path = &self.path;
        write_all(&mut *self.file, &t).map_err(|(_, e)| io_err(path, "write")(e))?;
        self.file.sync_data().map_err(io_err(path, "fdatasync"))?;
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        fs.sync_dir(dir).map_err(io_err(path, "fsync directory"))?;
        self.sum.file_bytes += TRAILER_BYTES as u64;
        Ok(self.sum)
    }
}

fn io_err<'p>(path: &'p Path, op: &'static str) -> impl FnOnce(io::Error) -> SnapshotError + 'p {
    move |source| SnapshotError::Io {
        path: path.to_path_buf(),
        op,
        source,
    }
}

/// Reads only the header of the snapshot at `path` (recovery needs its Lsn before it decides
/// which log records to replay; the blocks are checked when the image is loaded).
pub fn read_header(fs: &dyn Fs, path: &Path) -> Result<SnapshotHeader, SnapshotError> {
    let file = fs.open_read(path).map_err(io_err(path, "open"))?;
    let mut h = [0u8; SNAPSHOT_HEADER_BYTES];
    let got = file.read_at(&mut h, 0).map_err(io_err(path, "read"))?;
    let damaged = |reason: String| SnapshotError::Damaged {
        path: path.to_path_buf(),
        offset: 0,
        reason,
    };
    if got < SNAPSHOT_HEADER_BYTES {
        return Err(damaged(format!(
            "{got} bytes, shorter than the snapshot header ({SNAPSHOT_HEADER_BYTES})"
        )));
    }
    SnapshotHeader::decode(&h).map_err(damaged)
}

/// Reads the snapshot at `path`: checks every block and the trailer, calling `load` for each
/// entry in order. Returns the header and the totals; any damage, a missing trailer or an
/// error of `load` is an error naming the file and offset.
pub fn read(
    fs: &dyn Fs,
    path: &Path,
    limits: SnapshotLimits,
    mut load: impl FnMut(&Entry) -> Result<(), String>,
) -> Result<(SnapshotHeader, SnapshotSummary), SnapshotError> {
    let file = fs.open_read(path).map_err(io_err(path, "open"))?;
    let len = file.file_len().map_err(io_err(path, "stat"))?;
    let damaged = |offset: u64, reason: String| SnapshotError::Damaged {
        path: path.to_path_buf(),
        offset,
        reason,
    };
    let read_at = |buf: &mut Vec<u8>, off: u64, n: usize| -> Result<(), SnapshotError> {
        if off + n as u64 > len {
            return Err(damaged(
                off,
                "the file ends early (a snapshot whose writing did not finish)".into(),
            ));
        }
        buf.resize(n, 0);
        let got = file.read_at(buf, off).map_err(io_err(path, "read"))?;
        if got < n {
            return Err(damaged(off, "the file shrank while it was read".into()));
        }
        Ok(())
    };
    let mut buf = Vec::new();
    read_at(&mut buf, 0, SNAPSHOT_HEADER_BYTES)?;
    let header = SnapshotHeader::decode(&buf).map_err(|r| damaged(0, r))?;
    let mut off = SNAPSHOT_HEADER_BYTES as u64;
    let mut sum = SnapshotSummary::default();
    let mut raw = Vec::new();
    loop {
        read_at(&mut buf, off, 1)?;
        if buf[0] == TAG_TRAILER {
            read_at(&mut buf, off, TRAILER_BYTES)?;
            let t = &buf[..];
            if crc32c::crc32c(&t[..28]) != u32_at(t, 28) || t[1..4] != [0, 0, 0] {
                return Err(damaged(off, "trailer checksum mismatch".into()));
            }
            let want = (u32_at(t, 4), u64_at(t, 8), u64_at(t, 16));
            if want != (sum.blocks, sum.entries, sum.raw_bytes) {
                return Err(damaged(
                    off,
                    format!(
                        "trailer says {want:?} (blocks, entries, bytes), the file has {:?}",
                        (sum.blocks, sum.entries, sum.raw_bytes)
                    ),
                ));
            }
            off += TRAILER_BYTES as u64;
            if off != len {
                return Err(damaged(
                    off,
                    format!("{} bytes after the trailer", len - off),
                ));
            }
            sum.file_bytes = len;
            return Ok((header, sum));
        }
        if buf[0] != TAG_BLOCK {
            return Err(damaged(
                off,
                format!("expected a block, found byte {:#04x}", buf[0]),
            ));
        }
        read_at(&mut buf, off, BLOCK_HEADER_BYTES)?;
        let (codec, entries, raw_len, stored) = (
            buf[1],
            u32_at(&buf, 4),
            u32_at(&buf, 8) as usize,
            u32_at(&buf, 12) as usize,
        );
        let crc_want = u32_at(&buf, 16);
        let mut crc = crc32c::crc32c(&buf[..16]);
        // `stored` is bounded by the file's length before anything is allocated for it.
        read_at(&mut buf, off + BLOCK_HEADER_BYTES as u64, stored)?;
        crc = crc32c::crc32c_append(crc, &buf);
        if crc != crc_want {
            return Err(damaged(off, "block checksum mismatch".into()));
        }
        if raw_len > limits.block_bytes_max {
            return Err(damaged(
                off,
                format!(
                    "block of {raw_len} bytes over block_bytes_max ({})",
                    limits.block_bytes_max
                ),
            ));
        }
        let block: &[u8] = match codec {
            0 if raw_len == stored => &buf,
            1 => {
                raw.resize(raw_len, 0);
                match lz4_flex::block::decompress_into(&buf, &mut raw) {
                    Ok(n) if n == raw_len => &raw,
                    _ => return Err(damaged(off, "lz4 block does not decompress".into())),
                }
            }
            _ => return Err(damaged(off, format!("bad block codec {codec} or length"))),
        };
        let got = decode_entries(block, entries, &mut load).map_err(|(at, reason, is_load)| {
            if is_load {
                SnapshotError::Load {
                    path: path.to_path_buf(),
                    offset: off,
                    reason,
                }
            } else {
                damaged(off, format!("entry at byte {at} of the block: {reason}"))
            }
        })?;
        debug_assert_eq!(got, entries);
        sum.blocks += 1;
        sum.entries += u64::from(entries);
        sum.raw_bytes += raw_len as u64;
        off += (BLOCK_HEADER_BYTES + stored) as u64;
    }
}

/// Decodes `count` entries filling `block` exactly. Errors: (byte, reason, from `load`).
fn decode_entries(
    block: &[u8],
    count: u32,
    load: &mut impl FnMut(&Entry) -> Result<(), String>,
) -> Result<u32, (usize, String, bool)> {
    let mut at = 0usize;
    let take = |at: &mut usize, n: usize| -> Result<&[u8], (usize, String, bool)> {
        // `ok_or_else`: the error's String is built only on an error (eagerly, it cost an
        // allocation and a free per field of every entry read).
        let end = at
            .checked_add(n)
            .filter(|&e| e <= block.len())
            .ok_or_else(|| (*at, "runs past the block".to_string(), false))?;
        let s = &block[*at..end];
        *at = end;
        Ok(s)
    };
    let len = |at: &mut usize| -> Result<usize, (usize, String, bool)> {
        let start = *at;
        let mut v = 0u64;
        for i in 0..5 {
            let b = *block
                .get(*at)
                .ok_or_else(|| (start, "bad length".to_string(), false))?;
            *at += 1;
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return u32::try_from(v)
                    .map(|v| v as usize)
                    .map_err(|_| (start, "bad length".to_string(), false));
            }
        }
        Err((start, "bad length".to_string(), false))
    };
    for _ in 0..count {
        let start = at;
        let flags = take(&mut at, 1)?[0];
        if flags & !(ENTRY_DEADLINE | ENTRY_META) != 0 {
            return Err((start, format!("unknown entry flags {flags:#x}"), false));
        }
        let (kl, vl) = (len(&mut at)?, len(&mut at)?);
        let deadline = if flags & ENTRY_DEADLINE != 0 {
            u64_at(take(&mut at, 8)?, 0)
        } else {
            0
        };
        let meta = if flags & ENTRY_META != 0 {
            let m = take(&mut at, 12)?;
            Some(ItemMeta {
                flags: u32_at(m, 0),
                cas: u64_at(m, 4),
            })
        } else {
            None
        };
        let e = Entry {
            key: take(&mut at, kl)?,
            value: take(&mut at, vl)?,
            deadline,
            meta,
        };
        load(&e).map_err(|r| (start, r, true))?;
    }
    if at != block.len() {
        return Err((at, "bytes after the block's last entry".into(), false));
    }
    Ok(count)
}
