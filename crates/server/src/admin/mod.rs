//! Administration endpoints beside the data protocols: today Prometheus /metrics over HTTP.
//! Operator-facing services (a future admin socket, health checks) live here, away from the
//! request paths.

pub(crate) mod metrics;
