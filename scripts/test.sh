#!/usr/bin/env bash
# Runs every test of the project on a fresh machine: installs what it needs (the real Redis
# tools, redis-py and a JDK with Maven for Jedis, which the client-compatibility tests drive;
# memcached and a font for the benchmark's tests), then lint + tests. Idempotent: a second
# run installs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

# Every test whose peer (redis-server, memcached, redis-py, the font...) is missing fails
# instead of skipping (directkv_testkit::peer): this command proves the comparisons ran.
export DIRECTKV_REQUIRE_PEERS=1

command -v cargo >/dev/null || { echo "cargo not found: install rustup first" >&2; exit 1; }
rustup show active-toolchain >/dev/null 2>&1 || rustup toolchain install "$(sed -n 's/^channel = "\(.*\)"/\1/p' rust-toolchain.toml)" --profile minimal -c rustfmt -c clippy

# memcached is the bench's third comparison target and the memcached port's reference;
# libmemcached-tools are memcached's command-line clients (Debian names them memccp, memccat,
# ...: crates/cli/tests/it/clients_memcache.rs); fonts-dejavu-core gives the PNG charts a font.
if ! command -v redis-cli >/dev/null || ! command -v redis-benchmark >/dev/null \
  || ! command -v memcached >/dev/null || ! command -v memccp >/dev/null \
  || [ ! -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ]; then
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server memcached libmemcached-tools fonts-dejavu-core >/dev/null
fi
# DejaVu Sans for the benchmark charts (plotters draws text with it; `bench ocsm` and its tests).
if [ ! -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ]; then
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq fonts-dejavu-core >/dev/null
fi
# A JDK and Maven for the Jedis client test (crates/cli/tests/it/clients_jvm.rs builds its Java
# program with `mvn package`; Jedis comes from Maven Central into ~/.m2 on the first run).
if ! command -v java >/dev/null || ! command -v javac >/dev/null || ! command -v mvn >/dev/null; then
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq default-jdk-headless maven >/dev/null
fi
# redis-py and pymemcache go into a virtual environment of the repository (.venv/, git-ignored): Debian 12
# and Ubuntu 24.04 refuse `pip install` into the system Python (PEP 668). The client tests run
# the interpreter DIRECTKV_PYTHON names. Debian ships venv's pip bootstrap (ensurepip) apart, in
# python3-venv: without it `python3 -m venv` fails or leaves an environment without pip.
make_venv() { rm -rf .venv && python3 -m venv .venv >/dev/null 2>&1 && [ -x .venv/bin/pip ]; }
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c "import redis, pymemcache" 2>/dev/null; then
  if ! command -v python3 >/dev/null || ! make_venv; then
    if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3 python3-venv >/dev/null
    make_venv || { echo "python3 -m venv .venv failed even with python3-venv installed" >&2; exit 1; }
  fi
  .venv/bin/python -m pip install -q redis pymemcache
fi
export DIRECTKV_PYTHON="$PWD/.venv/bin/python"

cargo fmt --all -- --check
# The `ci` profile (Cargo.toml) is release's optimisation without its link-time optimisation
# and full debuginfo, so that linking a test binary does not re-optimise every crate it uses;
# clippy checks in the same profile, so that both share the build scripts and macros. Each
# crate's integration tests are one binary (tests/it/main.rs says how to add one).
cargo clippy --workspace --all-targets --profile ci -- -D warnings
cargo test --workspace --profile ci
# The fuzz targets are their own workspace (cargo-fuzz needs nightly to run them): check that
# they still build against the crates and the shared test kit.
cargo check --manifest-path fuzz/Cargo.toml --bins
