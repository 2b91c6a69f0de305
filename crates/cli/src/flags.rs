//! Value parsers and checks shared by several subcommands' flags: sizes ("2G"), key
//! distributions and durations in seconds. Each turns a bad value into the error clap or the
//! subcommand prints.

use directkv_bench::dist::Distribution;

/// "2G", "256M", "64K", "1GiB", or plain bytes: the server's size syntax
/// (`directkv_server::config::parse_size`), so that flags and the configuration file agree.
pub fn parse_bytes(s: &str) -> Result<usize, String> {
    directkv_server::config::parse_size(s)
}

/// A key distribution: uniform, zipf[:THETA] or ycsb-zipf[:THETA].
pub fn parse_dist(s: &str) -> Result<Distribution, String> {
    Distribution::parse(s).ok_or_else(|| format!("unknown distribution {s:?}"))
}

/// Seconds from a flag, or an error naming the flag.
pub fn duration_flag(
    name: &str,
    seconds: f64,
    allow_zero: bool,
) -> Result<std::time::Duration, String> {
    if !seconds.is_finite() || seconds < 0.0 || (!allow_zero && seconds == 0.0) {
        return Err(format!(
            "--{name} must be a positive number of seconds, got {seconds}"
        ));
    }
    Ok(std::time::Duration::from_secs_f64(seconds))
}
