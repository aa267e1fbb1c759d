#!/usr/bin/env bash
# Runs leakloop's OpenCL scenarios on an Android device over adb, with the OpenCL interposer
# standing in for the vendor libOpenCL.so so that every OpenCL object is counted.
#
# Needs: adb with one device attached, the Android NDK (ANDROID_NDK_HOME), the Rust target
# aarch64-linux-android, and for the LiteRT-LM scenario the LiteRT-LM Android shared libraries
# (LITERT_LM_ANDROID_LIBS, a folder) and a model (LITERT_LM_MODEL).
#
# Usage: ci/android/run-opencl-scenarios.sh [scenario.yaml ...]
#   default scenarios: fixtures/scenarios/opencl-*.yaml and, when LITERT_LM_ANDROID_LIBS is set,
#   ci/android/scenarios/litert-lm-opencl-per-turn.yaml
set -euo pipefail

API="${ANDROID_API:-29}"
TARGET=aarch64-linux-android
DEVICE_DIR="${DEVICE_DIR:-/data/local/tmp/leakloop}"
OUT="${OUT:-target/android-reports}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"

die() { echo "error: $*" >&2; exit 2; }
command -v adb >/dev/null || die "adb not found"
[ -n "${ANDROID_NDK_HOME:-}" ] || die "set ANDROID_NDK_HOME to the NDK folder"
[ "$(adb get-state 2>/dev/null)" = device ] || die "no device attached (adb get-state)"

clang="$ANDROID_NDK_HOME/toolchains/llvm/prebuilt/linux-x86_64/bin/${TARGET}${API}-clang"
[ -x "$clang" ] || die "NDK clang not found at $clang"
export CARGO_TARGET_AARCH64_LINUX_ANDROID_LINKER="$clang"
export CC_aarch64_linux_android="$clang"

echo "== building leakloop and the interposer for $TARGET (API $API)"
cargo build --release --target "$TARGET" -p leakloop -p cl-interposer
bin="target/$TARGET/release"

echo "== finding the vendor OpenCL library"
real_cl=""
for p in /vendor/lib64/libOpenCL.so /system/vendor/lib64/libOpenCL.so /vendor/lib64/egl/libGLES_mali.so; do
  if adb shell "[ -f $p ]" 2>/dev/null; then real_cl="$p"; break; fi
done
[ -n "$real_cl" ] || die "no libOpenCL.so on the device (looked in /vendor/lib64, /system/vendor/lib64)"
echo "   $real_cl"

echo "== pushing to $DEVICE_DIR"
adb shell "rm -rf $DEVICE_DIR && mkdir -p $DEVICE_DIR/clshim $DEVICE_DIR/lib $DEVICE_DIR/scenarios $DEVICE_DIR/reports"
adb push "$bin/leakloop" "$DEVICE_DIR/" >/dev/null
adb push "$bin/libcl_interposer.so" "$DEVICE_DIR/" >/dev/null
# Engines that dlopen("libOpenCL.so") by name and dlsym() from that handle bypass LD_PRELOAD;
# a copy named libOpenCL.so first on LD_LIBRARY_PATH is what they open instead.
adb shell "cp $DEVICE_DIR/libcl_interposer.so $DEVICE_DIR/clshim/libOpenCL.so"

scenarios=("$@")
if [ ${#scenarios[@]} -eq 0 ]; then
  scenarios=(fixtures/scenarios/opencl-*.yaml)
  if [ -n "${LITERT_LM_ANDROID_LIBS:-}" ]; then
    scenarios+=(ci/android/scenarios/litert-lm-opencl-per-turn.yaml)
  fi
fi
if [ -n "${LITERT_LM_ANDROID_LIBS:-}" ]; then
  adb push "$LITERT_LM_ANDROID_LIBS/." "$DEVICE_DIR/lib/" >/dev/null
  [ -n "${LITERT_LM_MODEL:-}" ] || die "set LITERT_LM_MODEL to the .litertlm model to push"
  adb push "$LITERT_LM_MODEL" "$DEVICE_DIR/scenarios/model.litertlm" >/dev/null
fi

mkdir -p "$OUT"
status=0
for s in "${scenarios[@]}"; do
  name="$(basename "$s" .yaml)"
  adb push "$s" "$DEVICE_DIR/scenarios/$name.yaml" >/dev/null
  echo "== $name"
  set +e
  adb shell "cd $DEVICE_DIR && \
    LD_LIBRARY_PATH=$DEVICE_DIR/clshim:$DEVICE_DIR/lib \
    LEAKLOOP_CL_REAL_LIB=$real_cl \
    LEAKLOOP_CL_INTERPOSER=$DEVICE_DIR/libcl_interposer.so \
    OPENCL_DYLIB_PATH=$DEVICE_DIR/libcl_interposer.so \
    ./leakloop run scenarios/$name.yaml --out reports/$name; echo \"exit=\$?\"" | tee "$OUT/$name.log"
  set -e
  code="$(sed -n 's/^exit=\([0-9]*\).*/\1/p' "$OUT/$name.log" | tail -1)"
  adb pull "$DEVICE_DIR/reports/$name" "$OUT/" >/dev/null 2>&1 || true
  # The injected-fault fixtures must fail their expectations (exit 1); everything else must pass.
  expected=0
  case "$name" in opencl-leak-*) expected=1 ;; esac
  echo "   exit ${code:-unknown} (expected $expected)"
  [ "${code:-x}" = "$expected" ] || status=1
done
exit "$status"
