//! The memcached driver: text protocol, one batch is one multi-key `get` for all of the batch's
//! reads followed by the batch's writes, pipelined, on one TCP connection.
//!
//! ```text
//!   request   get k1 k2 k3 ...\r\n                  every Get and the read half of every RMW
//!             set k 0 0 <len>\r\n<value>\r\n        every Put and the write half of every RMW
//!             incr k 1\r\n                          every AtomicAdd (values loaded as "0")
//!   replies   VALUE k 0 <len>\r\n<data>\r\n ... END\r\n   hits only, in request order
//!             STORED\r\n | <number>\r\n | NOT_FOUND\r\n | ERROR / CLIENT_ERROR / SERVER_ERROR
//! ```
//!
//! memcached answers a multi-get with the hits only, in the order the keys were asked, so a key
//! is a miss exactly when the next VALUE line names a later key (or END comes first). Sets are
//! sent without `noreply`, so that every write is confirmed and counted. All buffers are reused
//! across batches: a steady-state batch does not allocate.
//!
//! Non-goals: the binary and meta protocols, and vector operations (memcached has none; the
//! driver refuses vector workloads when it is created).

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{write_key, write_value, BatchOutcome, BenchOp, BenchOpKind, DataShape, DriverError};
use crate::net::workload::ValueFormat;

/// memcached's longest key, bytes.
pub const MEMCACHE_KEY_LEN_MAX: usize = 250;
/// Bytes read from the socket per read call when more replies are needed.
const READ_CHUNK_BYTES: usize = 64 << 10;
/// The longest reply line accepted before the reply is called invalid.
const LINE_LEN_MAX: usize = 1024;
/// The longest `stats` reply read (memcached's is about 3 KB).
const STATS_REPLY_LEN_MAX: usize = 64 << 10;

pub struct MemcacheDriver {
    stream: TcpStream,
    shape: DataShape,
    format: ValueFormat,
    out: Vec<u8>,
    inbuf: Vec<u8>,
    inbuf_pos: usize,
    key: Vec<u8>,
    value: Vec<u8>,
    /// Per read of the batch, in request order: did it hit.
    read_hit: Vec<bool>,
    /// Per write of the batch, in request order: its verdict.
    write_result: Vec<Verdict>,
}

/// The number of items memcached at `addr` holds: `curr_items` of `stats`, on a connection of
/// its own. The reply is read up to its `END` line, and at most `STATS_REPLY_LEN_MAX` bytes.
pub async fn curr_items(addr: SocketAddr) -> Result<u64, DriverError> {
    let mut stream = TcpStream::connect(addr)
        .await
        .map_err(|e| DriverError::Connect {
            target: addr.to_string(),
            reason: e.to_string(),
        })?;
    stream.write_all(b"stats\r\n").await?;
    let mut reply = Vec::with_capacity(READ_CHUNK_BYTES);
    while !reply.ends_with(b"END\r\n") {
        if reply.len() > STATS_REPLY_LEN_MAX {
            return Err(DriverError::Protocol(format!(
                "stats reply longer than {STATS_REPLY_LEN_MAX} bytes"
            )));
        }
        if stream.read_buf(&mut reply).await? == 0 {
            return Err(DriverError::Io(std::io::ErrorKind::UnexpectedEof.into()));
        }
    }
    String::from_utf8_lossy(&reply)
        .lines()
        .find_map(|line| line.strip_prefix("STAT curr_items ")?.trim().parse().ok())
        .ok_or_else(|| DriverError::Protocol("stats reply without curr_items".to_string()))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Ok,
    Missed,
    Failed,
}

impl MemcacheDriver {
    pub async fn connect(
        addr: SocketAddr,
        shape: DataShape,
        format: ValueFormat,
    ) -> Result<MemcacheDriver, DriverError> {
        if matches!(format, ValueFormat::VectorU32 { .. }) {
            return Err(DriverError::Unsupported(
                "memcached has no vector operations: vector workloads run on directkv only"
                    .to_string(),
            ));
        }
        if shape.key_size == 0 || shape.key_size > MEMCACHE_KEY_LEN_MAX {
            return Err(DriverError::Unsupported(format!(
                "memcached keys are 1 to {MEMCACHE_KEY_LEN_MAX} bytes, got --key-size {}",
                shape.key_size
            )));
        }
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|e| DriverError::Connect {
                target: addr.to_string(),
                reason: e.to_string(),
            })?;
        stream.set_nodelay(true)?;
        Ok(MemcacheDriver {
            stream,
            shape,
            format,
            out: Vec::with_capacity(READ_CHUNK_BYTES),
            inbuf: Vec::with_capacity(READ_CHUNK_BYTES),
            inbuf_pos: 0,
            key: Vec::with_capacity(shape.key_size),
            value: Vec::with_capacity(shape.value_size),
            read_hit: Vec::new(),
            write_result: Vec::new(),
        })
    }

    pub async fn execute(
        &mut self,
        ops: &[BenchOp],
        out: &mut BatchOutcome,
    ) -> Result<(), DriverError> {
        self.encode(ops)?;
        self.stream.write_all(&self.out).await?;
        self.read_gets(ops).await?;
        self.read_writes(ops).await?;
        let (mut reads, mut writes) = (0, 0);
        for op in ops {
            let verdict = match op.kind {
                BenchOpKind::Get => {
                    reads += 1;
                    hit_verdict(self.read_hit[reads - 1])
                }
                BenchOpKind::ReadModifyWrite => {
                    reads += 1;
                    writes += 1;
                    match hit_verdict(self.read_hit[reads - 1]) {
                        Verdict::Ok => self.write_result[writes - 1],
                        miss => miss,
                    }
                }
                _ => {
                    writes += 1;
                    self.write_result[writes - 1]
                }
            };
            match verdict {
                Verdict::Ok => out.ok += 1,
                Verdict::Missed => out.missed += 1,
                Verdict::Failed => out.failed += 1,
            }
        }
        Ok(())
    }

    fn encode(&mut self, ops: &[BenchOp]) -> Result<(), DriverError> {
        self.out.clear();
        let reads = ops.iter().filter(|op| is_read(op.kind)).count();
        if reads > 0 {
            self.out.extend_from_slice(b"get");
            for op in ops.iter().filter(|op| is_read(op.kind)) {
                self.out.push(b' ');
                write_key(op.key_id, self.shape.key_size, &mut self.out);
            }
            self.out.extend_from_slice(b"\r\n");
        }
        for op in ops {
            self.key.clear();
            write_key(op.key_id, self.shape.key_size, &mut self.key);
            match op.kind {
                BenchOpKind::Get => {}
                BenchOpKind::Put | BenchOpKind::ReadModifyWrite => {
                    self.value.clear();
                    match self.format {
                        ValueFormat::Counter => self.value.push(b'0'),
                        _ => write_value(op.key_id, self.shape.value_size, &mut self.value),
                    }
                    self.out.extend_from_slice(b"set ");
                    self.out.extend_from_slice(&self.key);
                    self.out.extend_from_slice(b" 0 0 ");
                    push_decimal(&mut self.out, self.value.len() as u64);
                    self.out.extend_from_slice(b"\r\n");
                    self.out.extend_from_slice(&self.value);
                    self.out.extend_from_slice(b"\r\n");
                }
                BenchOpKind::AtomicAdd => {
                    self.out.extend_from_slice(b"incr ");
                    self.out.extend_from_slice(&self.key);
                    self.out.extend_from_slice(b" 1\r\n");
                }
                BenchOpKind::VectorUpdate
                | BenchOpKind::VectorReduce
                | BenchOpKind::VectorFilter => {
                    return Err(DriverError::Unsupported(
                        "memcached has no vector operations".to_string(),
                    ))
                }
            }
        }
        Ok(())
    }

    /// Reads the multi-get's VALUE blocks up to END and marks which reads hit.
    async fn read_gets(&mut self, ops: &[BenchOp]) -> Result<(), DriverError> {
        self.read_hit.clear();
        let reads = ops.iter().filter(|op| is_read(op.kind)).count();
        if reads == 0 {
            return Ok(());
        }
        self.read_hit.resize(reads, false);
        let mut read_ops = ops.iter().filter(|op| is_read(op.kind)).enumerate();
        loop {
            let (start, end) = self.read_line().await?;
            let line = &self.inbuf[start..end];
            if line == b"END" {
                return Ok(());
            }
            let Some(rest) = line.strip_prefix(b"VALUE ") else {
                return Err(DriverError::Server(
                    String::from_utf8_lossy(line).into_owned(),
                ));
            };
            let mut fields = rest.split(|&b| b == b' ');
            let (Some(key), Some(_flags), Some(len)) =
                (fields.next(), fields.next(), fields.next())
            else {
                return Err(protocol("VALUE line", line));
            };
            let len = parse_decimal(len).ok_or_else(|| protocol("VALUE length", line))? as usize;
            // The hit belongs to the first remaining read whose key matches; the reads skipped on
            // the way were misses.
            let (key_start, key_len) = (start + 6, key.len());
            let mut matched = false;
            for (index, op) in read_ops.by_ref() {
                self.key.clear();
                write_key(op.key_id, self.shape.key_size, &mut self.key);
                if self.key[..] == self.inbuf[key_start..key_start + key_len] {
                    self.read_hit[index] = true;
                    matched = true;
                    break;
                }
            }
            if !matched {
                return Err(protocol("VALUE for a key not asked", line));
            }
            self.skip_data(len).await?;
        }
    }

    /// Reads one reply line per write of the batch.
    async fn read_writes(&mut self, ops: &[BenchOp]) -> Result<(), DriverError> {
        self.write_result.clear();
        for op in ops.iter().filter(|op| op.kind != BenchOpKind::Get) {
            let (start, end) = self.read_line().await?;
            let line = &self.inbuf[start..end];
            let verdict = match (op.kind, line) {
                (_, b"STORED") => Verdict::Ok,
                (BenchOpKind::AtomicAdd, b"NOT_FOUND") => Verdict::Missed,
                (BenchOpKind::AtomicAdd, digits) if parse_decimal(digits).is_some() => Verdict::Ok,
                _ => Verdict::Failed,
            };
            self.write_result.push(verdict);
        }
        Ok(())
    }

    /// The next `\r\n`-terminated line as a range of `inbuf`, without its terminator.
    async fn read_line(&mut self) -> Result<(usize, usize), DriverError> {
        let mut scanned = self.inbuf_pos;
        loop {
            if let Some(at) = self.inbuf[scanned..].windows(2).position(|w| w == b"\r\n") {
                let (start, end) = (self.inbuf_pos, scanned + at);
                self.inbuf_pos = end + 2;
                return Ok((start, end));
            }
            if self.inbuf.len() - self.inbuf_pos > LINE_LEN_MAX {
                return Err(protocol("reply line", &self.inbuf[self.inbuf_pos..]));
            }
            scanned = self.inbuf.len().saturating_sub(1).max(self.inbuf_pos);
            let base = self.fill().await?;
            scanned -= base;
        }
    }

    /// Consumes `len` data bytes and their `\r\n`.
    async fn skip_data(&mut self, len: usize) -> Result<(), DriverError> {
        while self.inbuf.len() - self.inbuf_pos < len + 2 {
            self.fill().await?;
        }
        self.inbuf_pos += len + 2;
        Ok(())
    }

    /// Reads more bytes, first dropping what was consumed; returns how far the unconsumed bytes
    /// moved back, so callers can shift the offsets they hold.
    async fn fill(&mut self) -> Result<usize, DriverError> {
        let moved = self.inbuf_pos;
        if moved > 0 {
            self.inbuf.drain(..moved);
            self.inbuf_pos = 0;
        }
        self.inbuf.reserve(READ_CHUNK_BYTES);
        if self.stream.read_buf(&mut self.inbuf).await? == 0 {
            return Err(DriverError::Io(std::io::ErrorKind::UnexpectedEof.into()));
        }
        Ok(moved)
    }
}

fn is_read(kind: BenchOpKind) -> bool {
    matches!(kind, BenchOpKind::Get | BenchOpKind::ReadModifyWrite)
}

fn hit_verdict(hit: bool) -> Verdict {
    if hit {
        Verdict::Ok
    } else {
        Verdict::Missed
    }
}

fn protocol(what: &str, line: &[u8]) -> DriverError {
    let shown = &line[..line.len().min(80)];
    DriverError::Protocol(format!(
        "bad memcached {what}: {:?}",
        String::from_utf8_lossy(shown)
    ))
}

fn parse_decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 20 {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &d| {
        d.is_ascii_digit()
            .then_some(())
            .and(n.checked_mul(10)?.checked_add(u64::from(d - b'0')))
    })
}

fn push_decimal(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}
