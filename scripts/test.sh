#!/usr/bin/env bash
# Runs every test of the project on a fresh machine: installs what it needs, then lint + tests.
set -euo pipefail
cd "$(dirname "$0")/.."

# The toolchain is pinned in rust-toolchain.toml; rustup installs it if this machine lacks it.
command -v cargo >/dev/null || { echo "cargo not found: install rustup first" >&2; exit 1; }
rustup show active-toolchain >/dev/null 2>&1 || rustup toolchain install "$(sed -n 's/^channel = "\(.*\)"/\1/p' rust-toolchain.toml)" --profile minimal -c rustfmt -c clippy

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --release -- -D warnings
cargo test --workspace --release
