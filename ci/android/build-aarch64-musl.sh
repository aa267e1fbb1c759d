#!/usr/bin/env bash
# Builds leakloop as a static aarch64 Linux binary (musl), linked by zig from PyPI's `ziglang`
# wheel: no Android NDK needed. Android's kernel runs static Linux binaries, so this can serve as
# LEAKLOOP_TARGET_BIN for `target: {adb: {native: ...}}` with the simulator; a static binary
# cannot dlopen, so engines that load a library (LiteRT-LM, OpenCL) need the NDK build instead.
#
# Usage: ci/android/build-aarch64-musl.sh [--release]   (prints the binary's path)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"

ZIG_VERSION=0.17.1
zig_dir="$root/target/ziglang-$ZIG_VERSION"
if [ ! -x "$zig_dir/ziglang/zig" ]; then
  mkdir -p "$zig_dir"
  python3 -m pip download --quiet --no-deps --only-binary=:all: \
    --platform manylinux_2_12_x86_64 "ziglang==$ZIG_VERSION" -d "$zig_dir"
  python3 -m zipfile -e "$zig_dir"/ziglang-*.whl "$zig_dir"
  chmod +x "$zig_dir/ziglang/zig"
fi
# rustc passes its own target triple flags; zig takes the target from -target.
cat > "$zig_dir/cc-aarch64-musl" <<CC
#!/bin/sh
exec "$zig_dir/ziglang/zig" cc -target aarch64-linux-musl "\$@"
CC
chmod +x "$zig_dir/cc-aarch64-musl"

rustup target add aarch64-unknown-linux-musl >&2
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_LINKER="$zig_dir/cc-aarch64-musl"
export CC_aarch64_unknown_linux_musl="$zig_dir/cc-aarch64-musl"
# zig brings its own musl start files; Rust's would be linked twice.
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_RUSTFLAGS="-C link-self-contained=no"
cargo build --target aarch64-unknown-linux-musl -p leakloop --bin leakloop "$@" >&2
profile=debug
[ "${1:-}" = --release ] && profile=release
echo "$root/target/aarch64-unknown-linux-musl/$profile/leakloop"
