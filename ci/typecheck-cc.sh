#!/bin/sh
# A stand-in C compiler for the device targets' type-check (`cargo clippy --target
# aarch64-linux-android / aarch64-apple-darwin` in .ci/run). Build scripts of C-backed crates
# (zstd-sys for the sample store, ring, ...) want a cross compiler that this Linux machine does not
# have; clippy checks the Rust code and never links, so the C objects are never used. This writes
# an empty object wherever one is asked for (`-o FILE`, or `-FoFILE` when the build script takes it for an MSVC-like compiler) and succeeds; it is never used to build
# anything that runs.
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    -o) shift; out="$1" ;;
    -o*) out="${1#-o}" ;;
    -Fo*) out="${1#-Fo}" ;;
  esac
  shift
done
if [ -n "$out" ]; then
  : > "$out"
fi
exit 0
