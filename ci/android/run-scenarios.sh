#!/usr/bin/env bash
# Runs leakloop scenarios on an Android device over adb: the runner stays on this machine, the
# engine runs in leakloop's worker on the device (`target: {adb: {native: ...}}` in each
# scenario), started through `adb shell` and sampled there from its own /proc. One report folder
# per scenario (report.json, junit.xml, summary.md, plot.svg, samples.parquet) comes back under
# $OUT on this machine; nothing needs to be pulled from the device.
#
# Needs: adb and one device (or ANDROID_SERIAL naming one: adb reads it itself), a leakloop built
# for aarch64-linux-android (LEAKLOOP_TARGET_BIN; or ANDROID_NDK_HOME to build it here), and a
# leakloop for this machine (LEAKLOOP, default: built with cargo). For the LiteRT-LM scenario:
# LiteRT-LM's Android library (LITERT_LM_ANDROID_LIB, a liblitert-lm.so for arm64) and a model
# (LITERT_LM_MODEL); both are pushed by leakloop itself (`push: [model, lib]`).
#
# Usage: ci/android/run-scenarios.sh [scenario.yaml ...]
#   default: ci/android/scenarios/sim-on-device.yaml, and with LITERT_LM_ANDROID_LIB set also
#   ci/android/scenarios/litert-lm-opencl-per-turn.yaml
# Exit: 0 when every scenario ended with its expected code, 1 when one did not, 2 for a set-up
# error (nothing found to run with); each scenario's own code is printed and kept in its folder.
set -euo pipefail

API="${ANDROID_API:-29}"
TARGET=aarch64-linux-android
DEVICE_DIR=/data/local/tmp/leakloop   # the scenarios' `dir:`
OUT="${OUT:-target/android-reports}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"

die() { echo "error: $*" >&2; exit 2; }
command -v adb >/dev/null || die "adb not found (apt-get install adb)"

host_bin="${LEAKLOOP:-}"
if [ -z "$host_bin" ]; then
  cargo build --release -p leakloop -p cl-interposer
  host_bin=target/release/leakloop
fi

if [ -z "${LEAKLOOP_TARGET_BIN:-}" ]; then
  [ -n "${ANDROID_NDK_HOME:-}" ] || die "set LEAKLOOP_TARGET_BIN to a leakloop built for $TARGET, or ANDROID_NDK_HOME to build one"
  clang="$ANDROID_NDK_HOME/toolchains/llvm/prebuilt/linux-x86_64/bin/${TARGET}${API}-clang"
  [ -x "$clang" ] || die "NDK clang not found at $clang"
  export CARGO_TARGET_AARCH64_LINUX_ANDROID_LINKER="$clang" CC_aarch64_linux_android="$clang"
  cargo build --release --target "$TARGET" -p leakloop -p cl-interposer
  export LEAKLOOP_TARGET_BIN="target/$TARGET/release/leakloop"
  interposer="target/$TARGET/release/libcl_interposer.so"
fi

scenarios=("$@")
if [ ${#scenarios[@]} -eq 0 ]; then
  scenarios=(ci/android/scenarios/sim-on-device.yaml)
  [ -z "${LITERT_LM_ANDROID_LIB:-}" ] || scenarios+=(ci/android/scenarios/litert-lm-opencl-per-turn.yaml)
fi

# The OpenCL interposer (an Android build) in the scenarios' folder on the device, and a copy
# named libOpenCL.so for engines that open OpenCL by name; the real vendor library it forwards to.
if [ -n "${interposer:-${LEAKLOOP_TARGET_INTERPOSER:-}}" ] && [ "$(adb get-state 2>/dev/null)" = device ]; then
  adb shell "mkdir -p $DEVICE_DIR/clshim"
  adb push "${interposer:-$LEAKLOOP_TARGET_INTERPOSER}" "$DEVICE_DIR/libcl_interposer.so" >/dev/null
  adb shell "cp $DEVICE_DIR/libcl_interposer.so $DEVICE_DIR/clshim/libOpenCL.so"
fi

# The vendor OpenCL library the interposer forwards to; the scenarios name the usual place.
real_cl=/vendor/lib64/libOpenCL.so
if [ "$(adb get-state 2>/dev/null)" = device ]; then
  for p in /vendor/lib64/libOpenCL.so /system/vendor/lib64/libOpenCL.so /vendor/lib64/egl/libGLES_mali.so; do
    if adb shell "[ -f $p ]" 2>/dev/null; then real_cl="$p"; break; fi
  done
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

mkdir -p "$OUT"
status=0
for s in "${scenarios[@]}"; do
  name="$(basename "$s" .yaml)"
  # The scenario with this device's vendor library (its paths come from flags, so the copy may
  # live anywhere).
  sed "s#LEAKLOOP_CL_REAL_LIB: .*#LEAKLOOP_CL_REAL_LIB: $real_cl#" "$s" > "$work/$name.yaml"
  args=(run "$work/$name.yaml" --quiet --out "$OUT/$name")
  case "$name" in litert-lm-*) args+=(--lib "$LITERT_LM_ANDROID_LIB" --model "${LITERT_LM_MODEL:?set LITERT_LM_MODEL}") ;; esac
  echo "== $name"
  started=$(date +%s)
  set +e
  "$host_bin" "${args[@]}" 2>&1 | tee "$OUT/$name.log"
  code=${PIPESTATUS[0]}
  set -e
  # The scenario's first line says which exit it expects (`# Expected: ... (exit N)`).
  expected="$(sed -n '1s/.*(exit \([0-9]*\)).*/\1/p' "$s")"
  echo "   exit $code (expected ${expected:-0}) in $(( $(date +%s) - started )) s"
  [ "$code" = "${expected:-0}" ] || status=1
done
exit "$status"
