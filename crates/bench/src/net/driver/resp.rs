//! The RESP driver: one batch is one pipeline of commands on one TCP connection, written at once
//! and answered in order. Works against redis-server and directkv alike.
//!
//! ```text
//!   Get         GET k                    nil -> missed
//!   Put         SET k v
//!   RMW         GET k ; SET k v          two commands, one operation
//!   AtomicAdd   INCRBY k 1               values loaded as the decimal string "0"
//!   Vector*     DKV.UPDATEV k add u32 1 | DKV.REDUCE k sum u32 0 | DKV.FILTER k nonzero u32 0
//!   load        SET k v | SET k 0 | DKV.VSET k u32 e0 e1 ...
//! ```
//!
//! Commands are framed by the proto crate's `encode_command` and replies read by its
//! `parse_reply`, so the bench speaks exactly what the server parses. Error replies count as
//! failed operations, not as driver errors: a run against a misconfigured target reports its
//! failures instead of stopping. The output and input buffers are reused across batches, so a
//! steady-state batch allocates only what `parse_reply` builds for each reply (a GET's value).
//!
//! Non-goals: RESP3, AUTH, and cluster redirections.

use std::net::SocketAddr;

use directkv_proto::resp::{encode_command, parse_reply, Reply};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{write_key, write_value, BatchOutcome, BenchOp, BenchOpKind, DataShape, DriverError};
use crate::net::workload::{vector_elem, ValueFormat};

/// Bytes read from the socket per read call when more replies are needed.
const READ_CHUNK_BYTES: usize = 64 << 10;

pub struct RespDriver {
    stream: TcpStream,
    shape: DataShape,
    format: ValueFormat,
    /// The pipeline being sent.
    out: Vec<u8>,
    /// Received bytes; `[inbuf_pos..]` is not parsed yet.
    inbuf: Vec<u8>,
    inbuf_pos: usize,
    key: Vec<u8>,
    value: Vec<u8>,
}

/// How a reply counts for the operation it answers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Ok,
    Missed,
    Failed,
}

impl RespDriver {
    /// Connects and, for vector workloads, checks that the server has directkv's DKV.* commands
    /// (Redis does not), so an unsupported target fails here rather than during the run.
    pub async fn connect(
        addr: SocketAddr,
        shape: DataShape,
        format: ValueFormat,
    ) -> Result<RespDriver, DriverError> {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|e| DriverError::Connect {
                target: addr.to_string(),
                reason: e.to_string(),
            })?;
        stream.set_nodelay(true)?;
        let mut driver = RespDriver {
            stream,
            shape,
            format,
            out: Vec::with_capacity(READ_CHUNK_BYTES),
            inbuf: Vec::with_capacity(READ_CHUNK_BYTES),
            inbuf_pos: 0,
            key: Vec::with_capacity(shape.key_size),
            value: Vec::with_capacity(shape.value_size),
        };
        if matches!(format, ValueFormat::VectorU32 { .. })
            && driver
                .info_field("server", "directkv_version")
                .await?
                .is_none()
        {
            return Err(DriverError::Unsupported(format!(
                "vector workloads need directkv's DKV.* commands; the RESP server at {addr} is not directkv"
            )));
        }
        Ok(driver)
    }

    /// The value of `field` in `INFO section`, if the server reports it.
    pub async fn info_field(
        &mut self,
        section: &str,
        field: &str,
    ) -> Result<Option<String>, DriverError> {
        self.out.clear();
        encode_command(&[b"INFO", section.as_bytes()], &mut self.out);
        self.stream.write_all(&self.out).await?;
        let text = match self.next_reply().await? {
            Reply::Bulk(Some(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
            Reply::Error(e) => return Err(DriverError::Server(e)),
            other => {
                return Err(DriverError::Protocol(format!(
                    "INFO answered with {other:?}"
                )))
            }
        };
        Ok(text.lines().find_map(|line| {
            let (name, value) = line.split_once(':')?;
            (name == field).then(|| value.trim().to_string())
        }))
    }

    /// The number of keys the server holds (`DBSIZE`).
    pub async fn dbsize(&mut self) -> Result<u64, DriverError> {
        self.out.clear();
        encode_command(&[b"DBSIZE"], &mut self.out);
        self.stream.write_all(&self.out).await?;
        match self.next_reply().await? {
            Reply::Integer(n) => {
                u64::try_from(n).map_err(|_| DriverError::Protocol(format!("DBSIZE answered {n}")))
            }
            Reply::Error(e) => Err(DriverError::Server(e)),
            other => Err(DriverError::Protocol(format!(
                "DBSIZE answered with {other:?}"
            ))),
        }
    }

    /// Sends `ops` as one pipeline and waits for every reply.
    pub async fn execute(
        &mut self,
        ops: &[BenchOp],
        out: &mut BatchOutcome,
    ) -> Result<(), DriverError> {
        self.out.clear();
        for op in ops {
            self.encode(op);
        }
        self.stream.write_all(&self.out).await?;
        for op in ops {
            let first = self.verdict(op.kind).await?;
            let verdict = if op.kind == BenchOpKind::ReadModifyWrite {
                // The SET's reply must be read even when the GET missed, to stay in step.
                let second = self.verdict(BenchOpKind::Put).await?;
                if first == Verdict::Ok {
                    second
                } else {
                    first
                }
            } else {
                first
            };
            match verdict {
                Verdict::Ok => out.ok += 1,
                Verdict::Missed => out.missed += 1,
                Verdict::Failed => out.failed += 1,
            }
        }
        Ok(())
    }

    fn encode(&mut self, op: &BenchOp) {
        self.key.clear();
        write_key(op.key_id, self.shape.key_size, &mut self.key);
        let key = self.key.as_slice();
        let out = &mut self.out;
        match op.kind {
            BenchOpKind::Get => encode_command(&[b"GET", key], out),
            BenchOpKind::Put => encode_put(
                key,
                op.key_id,
                self.shape,
                self.format,
                &mut self.value,
                out,
            ),
            BenchOpKind::ReadModifyWrite => {
                encode_command(&[b"GET", key], out);
                encode_put(
                    key,
                    op.key_id,
                    self.shape,
                    self.format,
                    &mut self.value,
                    out,
                );
            }
            BenchOpKind::AtomicAdd => encode_command(&[b"INCRBY", key, b"1"], out),
            BenchOpKind::VectorUpdate => {
                encode_command(&[b"DKV.UPDATEV", key, b"add", b"u32", b"1"], out)
            }
            BenchOpKind::VectorReduce => {
                encode_command(&[b"DKV.REDUCE", key, b"sum", b"u32", b"0"], out)
            }
            BenchOpKind::VectorFilter => {
                encode_command(&[b"DKV.FILTER", key, b"nonzero", b"u32", b"0"], out)
            }
        }
    }

    /// Reads the next reply and judges it as the answer to an operation of `kind`.
    async fn verdict(&mut self, kind: BenchOpKind) -> Result<Verdict, DriverError> {
        Ok(match self.next_reply().await? {
            Reply::Error(_) => Verdict::Failed,
            Reply::Bulk(None) | Reply::Null | Reply::Array(None)
                if matches!(kind, BenchOpKind::Get | BenchOpKind::ReadModifyWrite) =>
            {
                Verdict::Missed
            }
            _ => Verdict::Ok,
        })
    }

    async fn next_reply(&mut self) -> Result<Reply, DriverError> {
        loop {
            match parse_reply(&self.inbuf[self.inbuf_pos..]) {
                Ok(Some((reply, used))) => {
                    self.inbuf_pos += used;
                    if self.inbuf_pos == self.inbuf.len() {
                        self.inbuf.clear();
                        self.inbuf_pos = 0;
                    }
                    return Ok(reply);
                }
                Ok(None) => {}
                Err(e) => return Err(DriverError::Protocol(e.to_string())),
            }
            if self.inbuf_pos > 0 {
                self.inbuf.drain(..self.inbuf_pos);
                self.inbuf_pos = 0;
            }
            self.inbuf.reserve(READ_CHUNK_BYTES);
            if self.stream.read_buf(&mut self.inbuf).await? == 0 {
                return Err(DriverError::Io(std::io::ErrorKind::UnexpectedEof.into()));
            }
        }
    }
}

/// The command that stores `key_id`'s load-phase value in `format`.
fn encode_put(
    key: &[u8],
    key_id: u64,
    shape: DataShape,
    format: ValueFormat,
    value: &mut Vec<u8>,
    out: &mut Vec<u8>,
) {
    match format {
        ValueFormat::Bytes => {
            value.clear();
            write_value(key_id, shape.value_size, value);
            encode_command(&[b"SET", key, value], out);
        }
        ValueFormat::Counter => encode_command(&[b"SET", key, b"0"], out),
        ValueFormat::VectorU32 { elems } => {
            // Only the load phase stores vectors, so building the argument list here is not on
            // the measured path.
            let numbers: Vec<String> = (0..elems)
                .map(|i| vector_elem(key_id, i).to_string())
                .collect();
            let mut args: Vec<&[u8]> = vec![b"DKV.VSET", key, b"u32"];
            args.extend(numbers.iter().map(|n| n.as_bytes()));
            encode_command(&args, out);
        }
    }
}
