//! SAVE, BGSAVE [SCHEDULE], LASTSAVE and SHUTDOWN's SAVE (issue 22 item 4): snapshots of
//! every shard (`persistence/snapshot.rs`), with Redis's replies. Each is a barrier (it needs
//! the store and every shard, and runs after the commands before it).
//!
//! ```text
//!   BGSAVE            start a round: "Background saving started" (a round runs: Redis's
//!                     "already in progress"; an automatic snapshot runs: Redis's AOF error)
//!   BGSAVE SCHEDULE   the same, but starts while automatic snapshots run ("...scheduled")
//!   SAVE              start a round and wait for it: OK
//!   LASTSAVE          unix seconds of the last successful round (the start time before one)
//!   SHUTDOWN SAVE     SAVE, then stop (FORCE: stop even when the save failed)
//! ```
//!
//! With `appendonly no` SAVE and BGSAVE answer an error that says persistence is off: a
//! snapshot is part of the log's store (docs/persistence.md), there is no stand-alone file to
//! write. A plain SHUTDOWN (or NOSAVE) does not snapshot: the log holds every write, and the
//! server's stop syncs it.

use directkv_proto::resp::{self, RespWriter, Version};

use super::{error, Planned};
use crate::persistence::snapshot::{
    RoundStart, ERR_AUTO_IN_PROGRESS, ERR_IN_PROGRESS, ERR_PERSISTENCE_OFF,
};
use crate::resp::reply::Pending;
use crate::shard::ShardCtx;

/// SAVE's (and SHUTDOWN SAVE's) reply when a shard's snapshot failed.
const ERR_SAVE_FAILED: &str = "ERR snapshot failed: see the server log";
/// SHUTDOWN SAVE when the save failed (Redis's text).
const ERR_SHUTDOWN: &str = "ERR Errors trying to SHUTDOWN. Check logs.";

/// Checks the arguments of SAVE, BGSAVE and LASTSAVE: a barrier when they are right.
pub(super) fn plan(p: &mut Pending, v: Version, name: &[u8], a: &[&[u8]]) -> Option<Planned> {
    let n = a.len();
    Some(match name {
        b"save" | b"lastsave" if n == 1 => Planned::Barrier,
        b"save" | b"lastsave" => super::arity(p, v, name),
        b"bgsave" if n == 1 || (n == 2 && a[1].eq_ignore_ascii_case(b"schedule")) => {
            Planned::Barrier
        }
        b"bgsave" => error(p, v, resp::err_syntax()),
        _ => return None,
    })
}

/// Runs SAVE, BGSAVE, LASTSAVE, or SHUTDOWN with SAVE (`plan` checked the arguments).
pub(super) async fn barrier(ctx: &ShardCtx, v: Version, a: &[&[u8]], out: &mut Vec<u8>) {
    let name = String::from_utf8_lossy(a[0]).to_ascii_lowercase();
    let mut w = RespWriter::new(out, v);
    match name.as_str() {
        "lastsave" => w.integer(last_save(ctx) as i64),
        "bgsave" => match ctx.store.as_deref() {
            None => w.error(ERR_PERSISTENCE_OFF),
            Some(store) => match store.snapshots.start_round(a.len() == 2) {
                RoundStart::New(_) if a.len() == 2 => w.simple("Background saving scheduled"),
                RoundStart::New(_) => w.simple("Background saving started"),
                RoundStart::InProgress => w.error(ERR_IN_PROGRESS),
                RoundStart::AutoRunning => w.error(ERR_AUTO_IN_PROGRESS),
            },
        },
        "save" => match save(ctx).await {
            Ok(()) => w.simple("OK"),
            Err(e) => w.error(e),
        },
        "shutdown" => {
            let force = a[1..].iter().any(|x| x.eq_ignore_ascii_case(b"force"));
            match save(ctx).await {
                Ok(()) => {}
                Err(e) if force => {
                    tracing::warn!(error = e, "SHUTDOWN SAVE FORCE: the save failed; stopping all the same (the log holds every write)");
                }
                Err(e) => {
                    tracing::error!(
                        error = e,
                        "SHUTDOWN SAVE: the save failed, the server keeps running"
                    );
                    // With persistence off, say so rather than point at the log.
                    w.error(if e == ERR_PERSISTENCE_OFF {
                        e
                    } else {
                        ERR_SHUTDOWN
                    });
                    return;
                }
            }
            tracing::warn!("SHUTDOWN SAVE asked by a client: saved, stopping");
            // No reply: the stop closes the connection, as Redis's SHUTDOWN does.
            ctx.stats.live.request_shutdown();
        }
        _ => w.error(&resp::err_wrong_arity(&name)),
    }
}

/// BGSAVE and LASTSAVE inside a transaction (SAVE and SHUTDOWN are refused there): BGSAVE
/// starts a round without waiting, answered as Redis answers it inside EXEC.
pub(crate) fn in_transaction(ctx: &ShardCtx, v: Version, a: &[&[u8]], out: &mut Vec<u8>) {
    let mut w = RespWriter::new(out, v);
    if a[0].eq_ignore_ascii_case(b"lastsave") {
        w.integer(last_save(ctx) as i64);
        return;
    }
    match ctx.store.as_deref() {
        None => w.error(ERR_PERSISTENCE_OFF),
        Some(store) => match store.snapshots.start_round(true) {
            RoundStart::InProgress => w.error(ERR_IN_PROGRESS),
            _ => w.simple("Background saving scheduled"),
        },
    }
}

fn last_save(ctx: &ShardCtx) -> u64 {
    match ctx.store.as_deref() {
        Some(store) => store.snapshots.last_save_unix(),
        None => ctx.stats.live.started_unix_secs(),
    }
}

/// A round, waited for.
async fn save(ctx: &ShardCtx) -> Result<(), &'static str> {
    let Some(store) = ctx.store.as_deref() else {
        return Err(ERR_PERSISTENCE_OFF);
    };
    match store.snapshots.start_round(true) {
        RoundStart::New(id) => {
            if store.snapshots.wait(id).await {
                Ok(())
            } else {
                Err(ERR_SAVE_FAILED)
            }
        }
        _ => Err(ERR_IN_PROGRESS),
    }
}
