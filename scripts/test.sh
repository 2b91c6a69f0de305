#!/usr/bin/env bash
# Runs every test of the project on a fresh machine: installs what it needs (the real Redis
# tools and redis-py, which the client-compatibility tests drive; memcached and a font for the
# benchmark's tests), then lint + tests.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v cargo >/dev/null || { echo "cargo not found: install rustup first" >&2; exit 1; }
rustup show active-toolchain >/dev/null 2>&1 || rustup toolchain install "$(sed -n 's/^channel = "\(.*\)"/\1/p' rust-toolchain.toml)" --profile minimal -c rustfmt -c clippy

# memcached is the bench's third comparison target; fonts-dejavu-core gives its PNG charts a font.
if ! command -v redis-cli >/dev/null || ! command -v redis-benchmark >/dev/null \
  || ! command -v memcached >/dev/null || [ ! -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ]; then
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server memcached fonts-dejavu-core >/dev/null
fi
# DejaVu Sans for the benchmark charts (plotters draws text with it; `bench ocsm` and its tests).
if [ ! -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ]; then
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq fonts-dejavu-core >/dev/null
fi
python3 -c "import redis" 2>/dev/null || python3 -m pip install -q redis

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --release -- -D warnings
cargo test --workspace --release
# The fuzz targets are their own workspace (cargo-fuzz needs nightly to run them): check that
# they still build against the crates and the shared test kit.
cargo check --manifest-path fuzz/Cargo.toml --bins
