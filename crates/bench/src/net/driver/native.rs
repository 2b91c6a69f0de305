//! The native-protocol driver: benchmark batches through `directkv-client`'s async batch API,
//! so the benchmark measures exactly what a user of the Rust client gets (shard-aware
//! routing, one connection per shard, copy-flag compression by the encoder).
//!
//! ```text
//!   [BenchOp; depth] ──round 1──> one client batch: get | put | get (RMW) | add | vector ops
//!                    ──round 2──> puts of the read-modify-writes, only if there are any
//!   replies ──> BatchOutcome { ok, missed, failed }
//! ```
//!
//! Mapping (SPEC section 1): Get → get; Put → put of `write_value(key_id)`; ReadModifyWrite →
//! get in round 1, then put of `write_value(key_id)` in round 2 (YCSB F's read, then write:
//! the write depends on the read, so it cannot share the read's round trip), counted as one
//! operation: missed if the read missed, failed if either failed; AtomicAdd → update_s2s add
//! u64 delta 1; VectorUpdate → update_s2v add u32 delta 1; VectorReduce → reduce sum u32 from 0;
//! VectorFilter → filter nonzero u32. Updates return their original value unless
//! `set_no_return(true)` (seed 002 measures both).
//!
//! Goals: no allocation per operation (keys and values are written into reused buffers, results
//! are read from a reused `Replies`). Non-goals: verifying values (the tests do), and
//! reconnecting mid-run: read-only retries are off, so a broken connection ends the run.

use directkv_client::{func, Client, ClientConfig, ClientError, ElemCode, Replies, Reply};

use super::{write_key, write_value, BatchOutcome, BenchOp, BenchOpKind, DataShape, DriverError};
use crate::net::workload::{vector_elem, ValueFormat};

/// Client name the driver announces in HELLO.
const CLIENT_NAME: &str = "directkv-bench";

/// Drives a directkv server over the native protocol.
pub struct NativeDriver {
    client: Client,
    shape: DataShape,
    no_return: bool,
    format: ValueFormat,
    replies: Replies,
    key: Vec<u8>,
    value: Vec<u8>,
    /// Key ids of the read-modify-writes of the batch, and their round-1 outcome.
    rmw: Vec<(u64, RmwRead)>,
}

/// How the read of a read-modify-write went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RmwRead {
    Found,
    Missed,
    Failed,
}

fn connect_error(target: &str, e: ClientError) -> DriverError {
    DriverError::Connect {
        target: target.to_string(),
        reason: e.to_string(),
    }
}

fn run_error(e: ClientError) -> DriverError {
    match e {
        ClientError::Connect { addr, source } => DriverError::Connect {
            target: addr.to_string(),
            reason: source.to_string(),
        },
        ClientError::Io(e) | ClientError::ConnectionLost { source: e, .. } => DriverError::Io(e),
        ClientError::Timeout { after, .. } => DriverError::Timeout(after),
        ClientError::Protocol(m) => DriverError::Protocol(m),
        ClientError::Server { code, message, .. } => {
            DriverError::Server(format!("error {code}: {message}"))
        }
        e @ ClientError::Auth(_) => DriverError::Connect {
            target: "server".into(),
            reason: e.to_string(),
        },
        e @ (ClientError::KeyTooLong { .. }
        | ClientError::ValueTooLarge { .. }
        | ClientError::BatchTooLarge { .. }) => DriverError::Unsupported(e.to_string()),
        ClientError::Op(e) => DriverError::Server(e.to_string()),
    }
}

impl NativeDriver {
    /// Connects to `addr` ("host:port") with the client's default time-outs.
    pub async fn connect(addr: &str, shape: DataShape) -> Result<NativeDriver, DriverError> {
        NativeDriver::connect_with(addr, shape, None).await
    }

    /// Connects with a password (a server started with `requirepass`).
    pub async fn connect_with(
        addr: &str,
        shape: DataShape,
        password: Option<String>,
    ) -> Result<NativeDriver, DriverError> {
        let config = ClientConfig {
            password,
            client_name: CLIENT_NAME.into(),
            retry_read_only: false,
            ..ClientConfig::default()
        };
        let client = Client::connect(addr, config)
            .await
            .map_err(|e| connect_error(addr, e))?;
        let key_len_max = usize::from(client.limits().key_len_max);
        if shape.key_size == 0 || shape.key_size > key_len_max {
            return Err(DriverError::Unsupported(format!(
                "key size {} is not in 1..={key_len_max}",
                shape.key_size
            )));
        }
        Ok(NativeDriver {
            client,
            shape,
            no_return: false,
            format: ValueFormat::Bytes,
            replies: Replies::new(),
            key: Vec::with_capacity(shape.key_size),
            value: Vec::with_capacity(shape.value_size),
            rmw: Vec::new(),
        })
    }

    /// What a Put stores: `write_value` bytes, a u64 counter of 0 (atomic workloads) or a u32
    /// vector (vector workloads), so the workload's updates find values of the right width.
    pub fn set_format(&mut self, format: ValueFormat) {
        self.format = format;
    }

    /// Sends updates (atomic add, vector update) with NO_RETURN: status only, no data back.
    pub fn set_no_return(&mut self, no_return: bool) {
        self.no_return = no_return;
    }

    /// The underlying client (for the load phase or checks).
    pub fn client(&mut self) -> &mut Client {
        &mut self.client
    }

    /// Runs `ops` as one batch (two rounds when it has read-modify-writes) and adds what came
    /// back to `out`.
    pub async fn execute(
        &mut self,
        ops: &[BenchOp],
        out: &mut BatchOutcome,
    ) -> Result<(), DriverError> {
        let NativeDriver {
            client,
            shape,
            no_return,
            format,
            replies,
            key,
            value,
            rmw,
        } = self;
        rmw.clear();
        let one_u64 = 1u64.to_le_bytes();
        let one_u32 = 1u32.to_le_bytes();
        let zero_u32 = 0u32.to_le_bytes();
        let mut b = client.batch();
        for op in ops {
            key.clear();
            write_key(op.key_id, shape.key_size, key);
            match op.kind {
                BenchOpKind::Get | BenchOpKind::ReadModifyWrite => b.get(key),
                BenchOpKind::Put => {
                    value.clear();
                    match *format {
                        ValueFormat::Bytes => write_value(op.key_id, shape.value_size, value),
                        ValueFormat::Counter => value.extend_from_slice(&0u64.to_le_bytes()),
                        ValueFormat::VectorU32 { elems } => (0..elems).for_each(|i| {
                            value.extend_from_slice(&vector_elem(op.key_id, i).to_le_bytes())
                        }),
                    }
                    b.put(key, value)
                }
                BenchOpKind::AtomicAdd if *no_return => {
                    b.update_s2s_no_return(key, func::ADD, ElemCode::U64, &one_u64)
                }
                BenchOpKind::AtomicAdd => b.update_s2s(key, func::ADD, ElemCode::U64, &one_u64),
                BenchOpKind::VectorUpdate if *no_return => {
                    b.update_s2v_no_return(key, func::ADD, ElemCode::U32, &one_u32)
                }
                BenchOpKind::VectorUpdate => b.update_s2v(key, func::ADD, ElemCode::U32, &one_u32),
                BenchOpKind::VectorReduce => b.reduce(key, func::SUM, ElemCode::U32, &zero_u32),
                BenchOpKind::VectorFilter => b.filter(key, func::NONZERO, ElemCode::U32, &[]),
            };
        }
        b.execute_into(replies).await.map_err(run_error)?;
        for (i, op) in ops.iter().enumerate() {
            let reply = replies.get(i);
            if op.kind == BenchOpKind::ReadModifyWrite {
                let read = match reply {
                    Reply::Ok(_) => RmwRead::Found,
                    Reply::NotFound => RmwRead::Missed,
                    _ => RmwRead::Failed,
                };
                rmw.push((op.key_id, read));
                continue;
            }
            match reply {
                Reply::Ok(_) => out.ok += 1,
                Reply::NotFound => out.missed += 1,
                Reply::NotStored | Reply::CasMismatch(_) | Reply::Error(_) => out.failed += 1,
            }
        }
        if rmw.is_empty() {
            return Ok(());
        }
        let mut b = client.batch();
        for &(key_id, _) in rmw.iter() {
            key.clear();
            write_key(key_id, shape.key_size, key);
            value.clear();
            write_value(key_id, shape.value_size, value);
            b.put(key, value);
        }
        b.execute_into(replies).await.map_err(run_error)?;
        for (i, &(_, read)) in rmw.iter().enumerate() {
            match (read, replies.get(i).is_ok()) {
                (RmwRead::Found, true) => out.ok += 1,
                (RmwRead::Missed, true) => out.missed += 1,
                _ => out.failed += 1,
            }
        }
        Ok(())
    }
}
