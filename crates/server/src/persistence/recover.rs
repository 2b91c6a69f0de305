//! Recovery at start (issue 22 item 3): the store in `dir` is opened, locked and loaded into
//! one engine per shard before any shard thread starts.
//!
//! (A minimal sequential version the write path is tested with; this session's recovery
//! helper replaces it with the parallel one: snapshots, torn-tail reports, leftovers, progress.)

use std::sync::Arc;

use directkv_engine::{Engine, EvictionPolicy, Results};
use directkv_persist::fs::Fs;
use directkv_persist::lock::DirLock;
use directkv_persist::log::{LogHeader, LogWriter};
use directkv_persist::manifest::{self, Manifest, ShardFiles};

use crate::config::ServerConfig;

/// A store opened for serving: per shard its engine (loaded) and its log (positioned after
/// its last good record), the manifest as stored, and the directory's lock.
pub(crate) struct Opened {
    pub(crate) shards: usize,
    pub(crate) engines: Vec<Engine>,
    pub(crate) logs: Vec<LogWriter>,
    pub(crate) manifest: Manifest,
    pub(crate) lock: DirLock,
}

/// Opens the store in `cfg.dir` (created with an empty store if missing), or says why not.
pub(crate) fn open(cfg: &ServerConfig, fs: Arc<dyn Fs>) -> Result<Opened, String> {
    let dir = &cfg.dir;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let lock = DirLock::acquire(dir).map_err(|e| e.to_string())?;
    let limits = super::log_limits();
    let (manifest, fresh) = match manifest::load(&*fs, dir).map_err(|e| e.to_string())? {
        Some(m) => (m, false),
        None => {
            let shards = cfg.shard_count();
            let mut m = Manifest {
                generation: 1,
                shards: Vec::with_capacity(shards),
            };
            for s in 0..shards {
                let name = manifest::log_file_name(s, 1);
                let header = LogHeader {
                    shard: s as u32,
                    first_lsn: 1,
                };
                LogWriter::create(&*fs, &dir.join(&name), header, limits)
                    .map_err(|e| e.to_string())?;
                m.shards.push(ShardFiles {
                    snapshot: None,
                    logs: vec![name],
                });
            }
            manifest::store(&*fs, dir, &m).map_err(|e| e.to_string())?;
            (m, true)
        }
    };
    let shards = manifest.shards.len();
    let engine_cfg = crate::shard::engine_config(cfg, shards);
    let mut engines = Vec::with_capacity(shards);
    let mut logs = Vec::with_capacity(shards);
    for (s, files) in manifest.shards.iter().enumerate() {
        let mut engine = Engine::new(engine_cfg.clone()).map_err(|e| e.to_string())?;
        engine.set_eviction_policy(EvictionPolicy::NoEviction);
        let mut results = Results::default();
        let mut last = None;
        for name in &files.logs {
            let path = dir.join(name);
            let scan = directkv_persist::log::replay(&*fs, &path, limits, |_, payload| {
                let r = directkv_persist::batch::decode(payload).map_err(|e| e.to_string())?;
                if r.head.flush {
                    engine.clear();
                }
                r.replay(&mut engine, &mut results);
                Ok(())
            })
            .map_err(|e| e.to_string())?;
            last = Some((path, scan));
        }
        let (path, scan) = last.ok_or_else(|| format!("shard {s} has no log"))?;
        logs.push(LogWriter::resume(&*fs, &path, &scan, limits).map_err(|e| e.to_string())?);
        engine.set_eviction_policy(engine_cfg.eviction_policy);
        engines.push(engine);
    }
    tracing::info!(dir = %dir.display(), shards, fresh, "store opened");
    Ok(Opened {
        shards,
        engines,
        logs,
        manifest,
        lock,
    })
}
