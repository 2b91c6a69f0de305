#!/usr/bin/env bash
# Builds directkv and serves it with sensible defaults: RESP on 127.0.0.1:7070, one shard per
# core, 1 GiB of memory, its data logged in ./directkv-data (--dir; --appendonly no for none).
# Extra flags go to `directkv serve` (see --help). Ctrl-C stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "cargo not found: install rustup first" >&2; exit 1; }
cargo build --release -p directkv
exec ./target/release/directkv serve "$@"
