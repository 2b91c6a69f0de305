#!/usr/bin/env bash
# Builds directkv and runs it with sensible defaults. Until the server lands (issue 3) this runs
# the in-process engine benchmark: a 2 GiB arena of 10-byte key-values filled to 50%.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "cargo not found: install rustup first" >&2; exit 1; }
cargo build --release -p directkv
exec ./target/release/directkv bench engine "$@"
