#!/usr/bin/env bash
# The full sweep over LiteRT-LM's release history: fetches every release in
# ci/litert-lm-releases.txt (or the versions given) and runs the chat scenario on each through the
# one FFI, printing a table row per release (capabilities, fallbacks, RSS after load, growth per
# turn, plateau, peak). Releases 0.11 to 0.17 link libvulkan.so.1 even on the CPU backend
# (Debian: apt-get install libvulkan1).
#
# Usage: ci/litert-releases.sh [VERSION ...]
# Each release is a ~45 MB wheel download the first time (cached under target/litert-lm/).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

if [[ $# -gt 0 ]]; then
  versions=("$@")
else
  mapfile -t versions < <(grep -v '^\s*#' ci/litert-lm-releases.txt | sed '/^\s*$/d')
fi

for v in "${versions[@]}"; do
  if [[ -f "target/litert-lm/$v/liblitert-lm.so" ]]; then
    continue
  fi
  if [[ "$v" == *.dev* ]]; then
    bash ci/fetch-litert-lm.sh "nightly==$v" >/dev/null
  else
    bash ci/fetch-litert-lm.sh "$v" >/dev/null
  fi
done

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
status=0
LEAKLOOP_REQUIRE_RELEASES="${versions[*]}" \
  cargo test -p device-tests --test litert_releases -- --nocapture >"$log" 2>&1 || status=$?
grep -E '^(\| |SKIPPED|test result|[0-9][^ ]*: a blocking send)' "$log" || true
if [[ $status -ne 0 ]]; then
  tail -n 40 "$log"
  exit "$status"
fi
