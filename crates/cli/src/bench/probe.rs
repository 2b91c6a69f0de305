//! `directkv bench probe`: the memory system alone (random line reads per second, and how much
//! of a line's latency computation can hide), as a table or one JSON object per region.

use clap::Args;
use directkv_bench::machine::probe;

use crate::flags::parse_bytes;

#[derive(Args)]
pub struct ProbeFlags {
    /// Region sizes, e.g. 256M,2G.
    #[arg(long, default_value = "2G", value_delimiter = ',', value_parser = parse_bytes)]
    memory: Vec<usize>,
    /// Steps of a dependent multiply chain per access (the computation to overlap with).
    #[arg(long, default_value = "0,20,40", value_delimiter = ',')]
    work: Vec<u32>,
    /// Seconds per measurement (each overlap figure alternates its two loops three times).
    #[arg(long, default_value_t = 1.0)]
    seconds: f64,
    /// One JSON object per region instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(f: ProbeFlags) -> Result<(), String> {
    if !(f.seconds > 0.0 && f.seconds <= 600.0) {
        return Err(format!("--seconds {} outside (0, 600]", f.seconds));
    }
    if let Some(m) = f.memory.iter().find(|&&m| m < 4096) {
        return Err(format!("--memory {m} is below the 4096-byte minimum"));
    }
    // The probe touches every page of its region: more than the free memory would swap or
    // wake the OOM killer rather than measure anything.
    let free = probe::available_bytes();
    if let Some(m) = f.memory.iter().find(|&&m| m > free) {
        return Err(format!(
            "--memory {m} is more than the {free} bytes of free memory"
        ));
    }
    for &bytes in &f.memory {
        let lines = probe::line_reads_per_sec(bytes, f.seconds);
        let overlap = probe::overlap(bytes, &f.work, f.seconds);
        if f.json {
            let j = serde_json::json!({
                "memory": bytes,
                "line_reads_per_sec": lines,
                "overlap": overlap,
            });
            println!("{j}");
            continue;
        }
        println!(
            "region {} MiB: {:.1} M random line reads/s",
            bytes >> 20,
            lines / 1e6
        );
        println!("  work steps   work ns   work+line ns   exposed ns per line");
        for o in &overlap {
            println!(
                "  {:>10}   {:>7.2}   {:>12.2}   {:>19.2}",
                o.work_steps, o.work_ns, o.work_and_line_ns, o.exposed_line_ns
            );
        }
    }
    Ok(())
}
