#!/usr/bin/env bash
# LiteRT-LM's GPU path on a Linux x86_64 machine without a GPU: WebGPU (Dawn) on Mesa's software
# Vulkan driver (lavapipe), with the OpenCL interposer loaded into the engine's worker.
#
# 1. installs lavapipe from Debian bookworm-backports (mesa-vulkan-drivers 25.x; bookworm's own
#    22.3 is too old for the engine), unless SKIP_APT=1 or a lavapipe ICD is already installed;
# 2. fetches LiteRT-LM's library (ci/fetch-litert-lm.sh), unless LITERT_LM_LIB is set;
# 3. builds leakloop and the interposer;
# 4. runs fixtures/scenarios/litert-gpu-chat.yaml (int8 model): must PASS (exit 0);
# 5. runs the same scenario on the fp32 model, which aborts inside the engine at load: the worker
#    must die, and leakloop must survive it with exit 3 and a report naming the crash;
# 6. prints load time, first-turn time (shader compilation), per-turn times, verdict and RSS.
#
# The shader cache starts empty (MESA_SHADER_CACHE_DIR in a fresh folder) so the first turn shows
# the cold compile a fresh runner pays; WARM_SHADER_CACHE=1 keeps the user's cache instead.
#
# Usage: ci/nightly-litert-gpu.sh [OUT_DIR]   (default target/nightly-litert-gpu)
# Exit: 0 when both cases behaved as stated, 1 otherwise, 2 when the setup failed.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out="${1:-target/nightly-litert-gpu}"
scenario=fixtures/scenarios/litert-gpu-chat.yaml
fp32_model=fixtures/models/tiny-qwen2-f32.litertlm

die() { echo "error: $*" >&2; exit 2; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

lavapipe_icd() { ls /usr/share/vulkan/icd.d/lvp_icd*.json 2>/dev/null | head -n1; }

echo "== lavapipe (Mesa software Vulkan)"
if [ "${SKIP_APT:-0}" != 1 ]; then
  installed="$(dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null || true)"
  if [ -z "$(lavapipe_icd)" ] || dpkg --compare-versions "${installed:-0}" lt 25; then
    . /etc/os-release
    [ "${VERSION_CODENAME:-}" = bookworm ] ||
      die "automatic install covers Debian bookworm only (this is ${PRETTY_NAME:-unknown}); install Mesa >= 25 lavapipe and rerun with SKIP_APT=1"
    if ! grep -rqs "bookworm-backports" /etc/apt/sources.list /etc/apt/sources.list.d/; then
      as_root tee /etc/apt/sources.list.d/bookworm-backports.sources >/dev/null <<'EOF'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    fi
    as_root apt-get update -q
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q -t bookworm-backports mesa-vulkan-drivers
  fi
fi
icd="$(lavapipe_icd)"
[ -n "$icd" ] || die "no lavapipe ICD under /usr/share/vulkan/icd.d (mesa-vulkan-drivers)"
echo "   mesa-vulkan-drivers $(dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null || echo '?'), $icd"
# Only lavapipe: the other Mesa drivers probe for hardware that is not there.
export VK_ICD_FILENAMES="$icd"

echo "== LiteRT-LM library"
if [ -z "${LITERT_LM_LIB:-}" ]; then
  lib_dir="$(bash ci/fetch-litert-lm.sh 2>/dev/null | tail -n1)" || die "ci/fetch-litert-lm.sh failed"
  echo "   $lib_dir"
fi

echo "== building leakloop and the OpenCL interposer"
cargo build -q -p leakloop -p cl-interposer
bin="${CARGO_TARGET_DIR:-target}/debug/leakloop"
[ -x "$bin" ] || die "$bin was not built"

rm -rf "$out"
mkdir -p "$out"
if [ "${WARM_SHADER_CACHE:-0}" != 1 ]; then
  export MESA_SHADER_CACHE_DIR="$out/mesa-shader-cache"
  mkdir -p "$MESA_SHADER_CACHE_DIR"
fi

# Runs leakloop on the scenario with extra arguments; prints the exit code.
run_case() {
  local name="$1"
  shift
  local rc=0
  local start=$SECONDS
  "$bin" run "$scenario" --quiet --out "$out/$name" "$@" >"$out/$name.log" 2>&1 || rc=$?
  echo "$rc $((SECONDS - start))"
}

# Summarises a report.json: timings from the samples, verdict, RSS.
summarize() {
  python3 - "$1" <<'PY'
import json, statistics, sys
report = json.load(open(sys.argv[1]))
record, verdict = report["record"], report["verdict"]
details = record["backend"]["details"]
print(f"   backend: {record['backend']['backend']} {record['backend']['version']}, "
      f"device {details.get('device')}, OpenCL interposer {details.get('opencl_interposer', '?')}")
outcome = record["outcome"]
if outcome["status"] != "completed":
    err = outcome["error"]
    print(f"   outcome: {outcome['status']} in turn {outcome['turn']} ({outcome['step']}): "
          f"{err['kind'].get('kind')} {err['kind'].get('how', '')}: {err['message'].splitlines()[0]}")
    abort = [l.strip(" |") for l in err["message"].splitlines() if "] " in l and l.strip(" |").startswith("F")]
    if abort:
        print(f"   engine's last word: {abort[0]}")
samples = record["samples"]
if isinstance(samples, dict) and samples.get("rows", 0) == 0:
    samples = []  # a run that failed before its first sample: the store has no rows to read
elif isinstance(samples, dict):
    # report.json (format 4 and later) names its sample store (samples.parquet; format 4:
    # samples.csv.zst) instead of holding the samples; DuckDB reads either by its extension.
    import duckdb, os
    store = os.path.join(os.path.dirname(os.path.abspath(sys.argv[1])), samples["store"])
    rows = duckdb.sql("SELECT turn, phase, t_ms FROM '%s'" % store.replace("'", "''")).fetchall()
    samples = [{"turn": t, "phase": p, "t_ms": ms} for t, p, ms in rows]
close = {s["turn"]: s["t_ms"] for s in samples if s["phase"] == "close"}
load = next((s["t_ms"] for s in samples if s["phase"] == "load"), None)
if load is not None and len(close) > 1:
    turns = sorted(close)
    first = close[turns[0]] - load
    rest = [close[t] - close[t - 1] for t in turns[1:] if t - 1 in close]
    print(f"   load: {load / 1000:.2f} s; first turn: {first / 1000:.2f} s; "
          f"later turns: median {statistics.median(rest) / 1000:.2f} s, "
          f"max {max(rest) / 1000:.2f} s over {len(rest)} turns")
print(f"   verdict: {verdict['status']}; turns completed: {record['turns_completed']}")
for name in ("rss", "native_heap", "cl_mem_bytes"):
    m = verdict["metrics"].get(name)
    if m:
        mib = lambda b: f"{b / 2**20:.1f} MiB"
        print(f"   {name}: baseline {mib(m['baseline'])}, after warm-up {mib(m['after_warmup'])}, "
              f"last {mib(m['last'])}, {m['slope_bytes_per_turn']:+.0f} B/turn ({m['classification']})")
cl = {k.split("/", 1)[1]: v for k, v in record["ledger"].get("totals", {}).items() if "/cl_" in k}
if cl:
    print("   OpenCL objects (interposer): " + ", ".join(
        f"{k} {v['created']} created/{v['deleted']} released" for k, v in sorted(cl.items())))
PY
}

status=0

echo "== case 1: $scenario (int8 model on the GPU backend), expect exit 0"
read -r rc secs < <(run_case gpu-chat)
echo "   exit $rc after ${secs} s (log: $out/gpu-chat.log)"
if [ -f "$out/gpu-chat/report.json" ]; then summarize "$out/gpu-chat/report.json"; fi
if [ "$rc" != 0 ]; then
  echo "   UNEXPECTED: wanted exit 0"
  tail -n 30 "$out/gpu-chat.log" | sed 's/^/   | /'
  status=1
fi

echo "== case 2: the same scenario on the fp32 model, expect the engine to abort (exit 3, report kept)"
read -r rc secs < <(run_case gpu-fp32-crash --model "$fp32_model")
echo "   exit $rc after ${secs} s (log: $out/gpu-fp32-crash.log)"
if [ -f "$out/gpu-fp32-crash/report.json" ]; then
  summarize "$out/gpu-fp32-crash/report.json"
  crashed="$(python3 -c 'import json,sys; o=json.load(open(sys.argv[1]))["record"]["outcome"]; print(o.get("error",{}).get("kind",{}).get("kind",""))' "$out/gpu-fp32-crash/report.json" || true)"
else
  echo "   no report.json was written"
  crashed=""
fi
if [ "$rc" != 3 ] || [ "$crashed" != crashed ]; then
  echo "   UNEXPECTED: wanted exit 3 with a kept report whose error kind is \`crashed\` (got exit $rc, kind '${crashed}')"
  status=1
fi

if [ "$status" = 0 ]; then
  echo "== OK: the GPU scenario passed and the engine's abort was survived"
else
  echo "== FAILED: see above"
fi
exit "$status"
