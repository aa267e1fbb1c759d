#!/usr/bin/env bash
# Fetches LiteRT-LM's C library from its Python wheel and unpacks it into
# target/litert-lm/<version>/ (outside the source tree; target/ is ignored by git): the Linux
# wheels hold litert_lm/liblitert-lm.so, the macOS (Apple silicon) wheel litert_lm/liblitert-lm.dylib.
#
# Usage: ci/fetch-litert-lm.sh [VERSION|nightly]
#   VERSION  a release of the `litert-lm-api` wheel (default 0.18.1)
#   nightly  the newest `litert-lm-api-nightly` wheel
#   nightly==VERSION  one given nightly (e.g. nightly==0.19.0.dev20261026), for repeatable CI
#
# LITERT_LM_PLATFORM=TAG fetches another platform's wheel (pip's --platform, e.g. macosx_12_0_arm64
# to fetch the macOS library on a Linux host); by default pip picks this machine's wheel.
#
# Prints the folder that holds the library on its last line. leakloop finds the newest folder
# under target/litert-lm/ by itself; LITERT_LM_LIB or --lib point it at another one.
set -euo pipefail

want="${1:-0.18.1}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest_root="${LITERT_LM_DIR:-$root/target/litert-lm}"
pip="${PIP:-python3 -m pip}"

if [[ "$want" == "nightly" ]]; then
  spec="litert-lm-api-nightly"
elif [[ "$want" == nightly==* ]]; then
  spec="litert-lm-api-nightly==${want#nightly==}"
else
  spec="litert-lm-api==$want"
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# --no-deps: only the wheel itself; the C library inside needs nothing from Python.
platform_args=()
if [[ -n "${LITERT_LM_PLATFORM:-}" ]]; then
  platform_args=(--platform "$LITERT_LM_PLATFORM" --only-binary=:all:)
fi
$pip download --quiet --no-deps "${platform_args[@]}" --dest "$work" "$spec" >&2
wheel="$(ls "$work"/*.whl | head -n1)"
[[ -f "$wheel" ]] || { echo "no wheel downloaded for $spec" >&2; exit 1; }

# The version is the wheel's own (a nightly's includes its date), read from its metadata.
python3 - "$wheel" "$work/unpacked" <<'PY'
import sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist()
             if n.endswith(("litert_lm/liblitert-lm.so", "litert_lm/liblitert-lm.dylib"))
             or n.endswith(".dist-info/METADATA")]
    z.extractall(out, names)
PY
meta="$(ls "$work"/unpacked/*.dist-info/METADATA | head -n1)"
version="$(sed -n 's/^Version: //p' "$meta" | head -n1)"
lib="$work/unpacked/litert_lm/liblitert-lm.so"
[[ -f "$lib" ]] || lib="$work/unpacked/litert_lm/liblitert-lm.dylib"
if [[ ! -f "$lib" ]]; then
  # 0.10.x: only a CPython extension (litert_lm_ext.so) without LiteRT-LM's C API.
  echo "$(basename "$wheel") holds no litert_lm/liblitert-lm.so (no C library: leakloop drives" \
    "LiteRT-LM through its C API, first shipped in 0.11.0)" >&2
  exit 1
fi

dest="$dest_root/$version"
mkdir -p "$dest"
cp "$lib" "$dest/$(basename "$lib")"
cp "$meta" "$dest/METADATA"
echo "$(basename "$wheel")" > "$dest/WHEEL"
echo "fetched LiteRT-LM $version ($(basename "$wheel")) into" >&2
echo "$dest"
