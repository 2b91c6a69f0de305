//! Server settings: every limit has a name and a default; all of them can be set in a TOML file
//! (`directkv serve --config file.toml`) and the common ones by flags.
//!
//! Datagrams and the password: native UDP and OCSM carry no password (a datagram has no
//! connection to hold an AUTH), so with `requirepass` set they would let anyone who can reach
//! the port read and write every key. Both are therefore on by default only on a loopback
//! address without a password (`udp`/`ocsm` left unset); with a password they are off unless
//! turned on explicitly AND acknowledged with `udp_insecure`, and `validate` refuses the
//! explicit request without the acknowledgement. An empty `requirepass` is refused: it is no
//! password.

use serde::Deserialize;

/// Largest value accepted from clients by default (SPEC: 1 MiB).
pub const VALUE_LEN_MAX_DEFAULT: usize = 1 << 20;
pub const KEY_LEN_MAX_DEFAULT: usize = 250;
pub const CONNECTIONS_MAX_DEFAULT: usize = 10_000;
/// Bytes a connection may have buffered but not yet parsed (a command larger than this closes
/// the connection with a protocol error).
pub const CONN_INPUT_BYTES_MAX_DEFAULT: usize = 64 << 20;
/// Reply bytes a connection buffers before it writes them out; batches shrink so that their
/// replies stay near this. A connection whose values suddenly grow can still buffer one batch
/// of up to `commands_per_batch_max` replies (each at most `value_len_max`) once.
pub const CONN_OUTPUT_BYTES_MAX_DEFAULT: usize = 4 << 20;
/// Commands parsed from one read before they are executed as one batch.
pub const COMMANDS_PER_BATCH_MAX_DEFAULT: usize = 1024;
/// Arguments of one RESP command.
pub const ARGS_MAX_DEFAULT: usize = 1 << 20;
/// Jobs queued to a shard from other shards before senders wait.
pub const SHARD_QUEUE_LEN_DEFAULT: usize = 1024;
/// OCSM over UDP (seed 004): default port.
pub const OCSM_PORT_DEFAULT: u16 = 7071;
/// Datagrams the batched OCSM paths receive with one `recvmmsg` and runs as one engine batch.
pub const OCSM_BURST_DATAGRAMS_MAX_DEFAULT: usize = 64;
/// Receive buffer asked for the OCSM socket (SO_RCVBUF; the kernel caps it at
/// `net.core.rmem_max`): deep enough to ride out a few milliseconds without being scheduled at
/// the seed's 45-message datagrams (4 MiB holds about 1400 of them).
pub const OCSM_RECV_BUFFER_BYTES_DEFAULT: usize = 4 << 20;
/// Seconds a client may take to read its replies before it is disconnected.
pub const REPLY_WRITE_TIMEOUT_SECS_DEFAULT: u64 = 30;
/// Microseconds a shard keeps polling its sockets without blocking after the last request it
/// read (see `ServerConfig::busy_poll_us`).
pub const BUSY_POLL_US_DEFAULT: u64 = 100;
/// The longest busy-poll window accepted (one second).
pub const BUSY_POLL_US_MAX: u64 = 1_000_000;
/// Bytes all client buffers together (input, replies, per-connection results) may hold before
/// the largest clients are disconnected: 256 MiB, the headroom over the arena the soak test
/// allows the whole process (issue 19), so that clients cannot take the machine's memory. Like
/// Redis's `maxmemory-clients` (whose default is off), but on by default: directkv's arena is
/// fixed, so client buffers are the one part of its memory that clients control.
pub const MAXMEMORY_CLIENTS_DEFAULT: usize = 256 << 20;
/// Reply data one request's batch may produce on one shard (the engine's default, 64 MiB: 64
/// values of the default `value_len_max`); operations past it are refused with
/// `ReplyTooLarge` (RESP: one `-ERR` for the command) and, if they are writes, not applied.
pub const RESULTS_BYTES_MAX_DEFAULT: usize = directkv_engine::RESULTS_BYTES_MAX_DEFAULT;

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    pub bind: String,
    pub port: u16,
    /// Prometheus metrics over HTTP (`GET /metrics`); None turns them off.
    pub metrics_port: Option<u16>,
    /// Shard threads (0 = one per core).
    pub shards: usize,
    /// Total arena bytes, split evenly over the shards.
    pub memory_bytes: usize,
    pub requirepass: Option<String>,
    /// Native protocol over UDP on `port`: None = on only on a loopback address without
    /// `requirepass` (see the module comment); Some(true) with a password needs `udp_insecure`.
    pub udp: Option<bool>,
    /// OCSM over UDP on `ocsm_port`, with the same rule as `udp` (`ocsm_port = None` also turns
    /// it off).
    pub ocsm: Option<bool>,
    /// The operator's acknowledgement that native UDP and OCSM, turned on with `udp`/`ocsm`,
    /// serve unauthenticated datagrams although `requirepass` is set.
    pub udp_insecure: bool,
    pub key_len_max: usize,
    pub value_len_max: usize,
    pub connections_max: usize,
    pub conn_input_bytes_max: usize,
    pub conn_output_bytes_max: usize,
    pub commands_per_batch_max: usize,
    pub args_max: usize,
    pub shard_queue_len: usize,
    pub reply_write_timeout_secs: u64,
    /// After reading a request, a shard keeps polling its sockets without sleeping for this
    /// many microseconds (yielding the core to any other runnable thread between polls), so
    /// that the next request is picked up without a wake-up: on this kind of VM a sleeping
    /// thread costs tens of microseconds per round trip. 0 turns it off (block in epoll as
    /// soon as there is nothing to do). An idle shard sleeps once the window has passed.
    pub busy_poll_us: u64,
    /// OCSM UDP port (None turns OCSM off; 0 = any free port). While `port` is 0 (tests), the
    /// default 7071 also becomes 0, so servers started side by side never collide.
    pub ocsm_port: Option<u16>,
    /// `plain` (recv_from/send_to per datagram), `batched` (recvmmsg/sendmmsg bursts on their
    /// own thread) or `batched-shard` (the same bursts inside shard 0's thread).
    pub ocsm_path: crate::ocsm::OcsmPath,
    /// Datagrams per burst on the batched paths.
    pub ocsm_burst_datagrams_max: usize,
    /// SO_RCVBUF of the OCSM socket (0 = the system default).
    pub ocsm_recv_buffer_bytes: usize,
    /// Largest OCSM datagram accepted (default: the UDP payload of a 1514-byte frame).
    pub ocsm_datagram_bytes_max: usize,
    /// Expected key + value bytes and target memory utilization, for the engine's tuning.
    pub expected_kv_bytes: usize,
    pub target_utilization: f64,
    /// Bytes all client buffers together may hold (see `MAXMEMORY_CLIENTS_DEFAULT`); past it
    /// the clients holding the most are disconnected first. 0 = no limit.
    pub maxmemory_clients: usize,
    /// Reply data of one request's batch per shard (see `RESULTS_BYTES_MAX_DEFAULT`), at most
    /// 4 GiB - 1; raised to `value_len_max` if below it, so one value always fits.
    pub results_bytes_max: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            bind: "127.0.0.1".into(),
            port: 7070,
            metrics_port: Some(7072),
            shards: 0,
            memory_bytes: 1 << 30,
            requirepass: None,
            udp: None,
            ocsm: None,
            udp_insecure: false,
            key_len_max: KEY_LEN_MAX_DEFAULT,
            value_len_max: VALUE_LEN_MAX_DEFAULT,
            connections_max: CONNECTIONS_MAX_DEFAULT,
            conn_input_bytes_max: CONN_INPUT_BYTES_MAX_DEFAULT,
            conn_output_bytes_max: CONN_OUTPUT_BYTES_MAX_DEFAULT,
            commands_per_batch_max: COMMANDS_PER_BATCH_MAX_DEFAULT,
            args_max: ARGS_MAX_DEFAULT,
            shard_queue_len: SHARD_QUEUE_LEN_DEFAULT,
            reply_write_timeout_secs: REPLY_WRITE_TIMEOUT_SECS_DEFAULT,
            busy_poll_us: BUSY_POLL_US_DEFAULT,
            ocsm_port: Some(OCSM_PORT_DEFAULT),
            ocsm_path: crate::ocsm::OcsmPath::Plain,
            ocsm_burst_datagrams_max: OCSM_BURST_DATAGRAMS_MAX_DEFAULT,
            ocsm_recv_buffer_bytes: OCSM_RECV_BUFFER_BYTES_DEFAULT,
            ocsm_datagram_bytes_max: directkv_proto::ocsm::DATAGRAM_BYTES_MAX_DEFAULT,
            expected_kv_bytes: 32,
            target_utilization: 0.5,
            maxmemory_clients: MAXMEMORY_CLIENTS_DEFAULT,
            results_bytes_max: RESULTS_BYTES_MAX_DEFAULT,
        }
    }
}

impl ServerConfig {
    pub fn from_toml(text: &str) -> Result<ServerConfig, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }

    /// Refuses settings that are unsafe or cannot work.
    pub fn validate(&self) -> Result<(), String> {
        if self.requirepass.as_deref() == Some("") {
            return Err(
                "refusing an empty requirepass: an empty password is no password (set a non-empty one, or leave requirepass out on a loopback address)"
                    .into(),
            );
        }
        if self.requirepass.is_some() && !self.udp_insecure {
            for (name, on) in [("udp", self.udp), ("ocsm", self.ocsm)] {
                if on == Some(true) {
                    return Err(format!(
                        "refusing {name} = true (--{name} yes) with requirepass: its datagrams carry no password, so anyone reaching the port could read and write every key; add udp_insecure = true (--udp-insecure) to serve them anyway"
                    ));
                }
            }
        }
        if !self.bind_is_loopback() && self.requirepass.is_none() {
            return Err(format!(
                "refusing to bind {} without --requirepass: only loopback addresses may run without a password",
                self.bind
            ));
        }
        if self.key_len_max == 0 || self.key_len_max > 255 {
            return Err(format!("key_len_max {} not in 1..=255", self.key_len_max));
        }
        if self.commands_per_batch_max == 0
            || self.connections_max == 0
            || self.shard_queue_len == 0
        {
            return Err(
                "commands_per_batch_max, connections_max and shard_queue_len must be positive"
                    .into(),
            );
        }
        if self.ocsm_burst_datagrams_max == 0 || self.ocsm_burst_datagrams_max > 1024 {
            return Err(format!(
                "ocsm_burst_datagrams_max {} not in 1..=1024",
                self.ocsm_burst_datagrams_max
            ));
        }
        if self.busy_poll_us > BUSY_POLL_US_MAX {
            return Err(format!(
                "busy_poll_us {} not in 0..={BUSY_POLL_US_MAX}",
                self.busy_poll_us
            ));
        }
        let dmax = self.ocsm_datagram_bytes_max;
        if !(directkv_proto::ocsm::HEADER_BYTES + 32..=directkv_proto::ocsm::DATAGRAM_BYTES_MAX_UDP)
            .contains(&dmax)
        {
            return Err(format!("ocsm_datagram_bytes_max {dmax} not in 38..=65507"));
        }
        if self.results_bytes_max == 0 || self.results_bytes_max > u32::MAX as usize {
            return Err(format!(
                "results_bytes_max {} not in 1..=4294967295",
                self.results_bytes_max
            ));
        }
        Ok(())
    }

    fn bind_is_loopback(&self) -> bool {
        matches!(self.bind.as_str(), "127.0.0.1" | "localhost" | "::1")
            || self.bind.starts_with("127.")
    }

    /// Whether an unauthenticated datagram protocol switched `on` is served: as asked, or when
    /// unset, only on a loopback address without a password (see the module comment).
    fn datagrams_served(&self, on: Option<bool>) -> bool {
        on.unwrap_or(self.bind_is_loopback() && self.requirepass.is_none())
    }

    /// Whether native UDP is served on `port` (see `udp`).
    pub fn udp_enabled(&self) -> bool {
        self.datagrams_served(self.udp)
    }

    /// The OCSM port to bind, if any (see `ocsm` and `ocsm_port`).
    pub fn ocsm_port_effective(&self) -> Option<u16> {
        if !self.datagrams_served(self.ocsm) {
            return None;
        }
        match self.ocsm_port {
            Some(OCSM_PORT_DEFAULT) if self.port == 0 => Some(0),
            p => p,
        }
    }

    pub fn shard_count(&self) -> usize {
        if self.shards > 0 {
            self.shards
        } else {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_overrides_defaults_and_rejects_unknown_keys() {
        let c = ServerConfig::from_toml("port = 9000\nshards = 3\nrequirepass = \"pw\"\n").unwrap();
        assert_eq!(
            (c.port, c.shards, c.requirepass.as_deref()),
            (9000, 3, Some("pw"))
        );
        assert_eq!(c.value_len_max, VALUE_LEN_MAX_DEFAULT);
        assert_eq!(c.busy_poll_us, BUSY_POLL_US_DEFAULT);
        let off = ServerConfig::from_toml("busy_poll_us = 0\n").unwrap();
        assert_eq!(off.busy_poll_us, 0);
        assert!(off.validate().is_ok());
        assert!(ServerConfig::from_toml("prot = 1").is_err());
    }

    #[test]
    fn non_loopback_needs_a_password() {
        let mut c = ServerConfig {
            bind: "0.0.0.0".into(),
            ..Default::default()
        };
        assert!(c.validate().unwrap_err().contains("requirepass"));
        c.requirepass = Some("x".into());
        assert!(c.validate().is_ok());
        assert!(ServerConfig::default().validate().is_ok());
    }

    #[test]
    fn datagrams_follow_the_bind_and_the_password() {
        let open = ServerConfig::default();
        assert!(open.udp_enabled() && open.ocsm_port_effective().is_some());
        let pw = ServerConfig {
            requirepass: Some("pw".into()),
            ..Default::default()
        };
        assert!(!pw.udp_enabled() && pw.ocsm_port_effective().is_none());
        for (udp, ocsm) in [(Some(true), None), (None, Some(true))] {
            let mut asked = ServerConfig {
                udp,
                ocsm,
                ..pw.clone()
            };
            assert!(asked.validate().unwrap_err().contains("--udp-insecure"));
            asked.udp_insecure = true;
            assert!(asked.validate().is_ok());
            assert_eq!(asked.udp_enabled(), udp.is_some());
            assert_eq!(asked.ocsm_port_effective().is_some(), ocsm.is_some());
        }
        let exposed = ServerConfig {
            bind: "0.0.0.0".into(),
            ..pw.clone()
        };
        assert!(!exposed.udp_enabled() && exposed.ocsm_port_effective().is_none());
        let off = ServerConfig {
            udp: Some(false),
            ocsm: Some(false),
            ..Default::default()
        };
        assert!(!off.udp_enabled() && off.ocsm_port_effective().is_none());
        let c = ServerConfig::from_toml("udp = false\nocsm = true\nudp_insecure = true\n").unwrap();
        assert_eq!(
            (c.udp, c.ocsm, c.udp_insecure),
            (Some(false), Some(true), true)
        );
    }

    #[test]
    fn client_memory_limits_have_defaults_and_toml_keys() {
        let d = ServerConfig::default();
        assert_eq!(d.maxmemory_clients, MAXMEMORY_CLIENTS_DEFAULT);
        assert_eq!(d.results_bytes_max, RESULTS_BYTES_MAX_DEFAULT);
        let c = ServerConfig::from_toml("maxmemory_clients = 0\nresults_bytes_max = 2097152\n")
            .unwrap();
        assert_eq!((c.maxmemory_clients, c.results_bytes_max), (0, 2 << 20));
        assert!(c.validate().is_ok());
        let small = ServerConfig {
            results_bytes_max: 0,
            ..Default::default()
        };
        assert!(small.validate().unwrap_err().contains("results_bytes_max"));
    }

    #[test]
    fn an_empty_password_is_no_password() {
        let c = ServerConfig::from_toml("requirepass = \"\"\n").unwrap();
        assert!(c.validate().unwrap_err().contains("empty"));
    }
}
