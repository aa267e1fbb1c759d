#!/usr/bin/env python3
"""A leak hunt across a runtime's published releases (docs/field-results.md).

For each runtime it knows (RUNTIMES below: the LiteRT Interpreter, ONNX Runtime, onnxruntime-genai,
LiteRT-LM's Python binding and llama-cpp-python), the hunt takes releases from PyPI, installs each
into a virtual environment of its own (under `--venvs`, by default target/hunt/venvs/, which git ignores), and
runs that runtime's whole scenario library through `leakloop run` with that environment's `bin`
first on PATH: every scenario of the library starts its driver as `python3 ...`, so the driver
runs on that release. The library's scenarios are the driver's option variants (reuse or per
request, kept outputs, views, arena off, IOBinding, ...). It writes, into `--out`:

  hunt.json           every release x scenario: verdict, exit code against the scenario's
                      `# Expected: ... (exit N)` header, growth per turn of each memory metric,
                      the unbalanced ledger kinds, the engine failure (crash, hang, load error)
  hunt.md             the same as one Markdown table per runtime (a row per release)
  runs/RUNTIME/RELEASE/  each release's suite folder as `leakloop run` writes it

A release that does not install (no wheel for this Python), or whose runtime cannot be imported,
or that does not load the committed model, is a row saying so: a finding, never the end of the
hunt. When a release imports only with NumPy 1 (built against it, while pip picks NumPy 2), the
hunt installs `numpy<2` and says so in the row. llama-cpp-python has no Linux wheels on PyPI, only
a source distribution: each release is built here (llama.cpp with CMake, about 4 minutes on 2 idle
cores, 17 under load), with the flags in its RUNTIMES entry; pip keeps the built wheel in its own
cache, so a later hunt of that release installs it without building again. A release that does
not build is a row like one that does not install.

Releases (`--release`, repeatable; default `newest`):
  installed   the runtime as this machine's python3 has it: no environment, no download
  newest      the newest release on PyPI
  minors      the newest patch of every minor release (e.g. 1.32.0, 1.31.1, 1.30.0, ...)
  all         every release PyPI lists
  X.Y.Z       that release
`--list` only prints the releases PyPI lists and whether each would install here (pip's resolver
in dry-run mode, no download of the wheels themselves; a runtime built from source is listed as
such, unchecked: checking would mean building it).

Examples (from the repository's root, after `cargo build -p leakloop`):
  python3 drivers/hunt/hunt.py --runtime ai-edge-litert --release all --out target/hunt/out
  python3 drivers/hunt/hunt.py --runtime onnxruntime --release 1.32.0 --release 1.20.1 \\
      --only ort-reuse --only ort-outputs-kept --out target/hunt/ort
  python3 drivers/hunt/hunt.py --runtime ai-edge-litert --release installed --only reuse.yaml \\
      --out /tmp/hunt-smoke
  python3 drivers/hunt/hunt.py --merge target/hunt/out/hunt.json target/hunt/ort/hunt.json \\
      --out target/hunt/all          # one table from hunts run side by side

The hunt is slow (minutes per release) and downloads wheels: CI never runs it; one release (the
installed one) with two scenarios is run by harness/tests/cli/field_results.rs.
Only the standard library is used; the exit code is 0 when the table was written (whatever the
verdicts), 2 for bad usage or an `--out` folder that is not empty.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Each runtime: its PyPI package, the module the driver imports, the other packages its driver
# needs, and its scenario library (globs relative to the repository's root); `requirement` (the
# package with its extras) and `source_build` (the environment its build needs: the runtime
# ships no wheel for this machine) where a runtime needs them.
RUNTIMES = {
    "ai-edge-litert": {
        "package": "ai-edge-litert",
        "module": "ai_edge_litert.interpreter",
        # Builds an interpreter: a wheel built against NumPy 1 imports with NumPy 2 and fails
        # only here.
        "probe": "from ai_edge_litert.interpreter import Interpreter; "
                 "Interpreter(model_path='fixtures/models/tiny-mlp.tflite')",
        "extra": ["numpy"],
        "scenarios": ["fixtures/litert-interpreter/*.yaml"],
        "exclude": [],
    },
    "onnxruntime": {
        "package": "onnxruntime",
        "module": "onnxruntime",
        "probe": "import numpy, onnxruntime as o; "
                 "o.InferenceSession('fixtures/onnxruntime/models/tiny-lm.onnx', "
                 "providers=['CPUExecutionProvider']).run(None, "
                 "{'ids': numpy.zeros((1, 4), dtype=numpy.int64)})",
        "extra": ["numpy"],
        "scenarios": ["fixtures/onnxruntime/ort-*.yaml"],
        # onnxruntime-genai's scenarios run under their own package's releases.
        "exclude": ["ort-genai-"],
    },
    "onnxruntime-genai": {
        "package": "onnxruntime-genai",
        "module": "onnxruntime_genai",
        "probe": "import numpy, onnxruntime_genai",
        "extra": ["numpy"],
        "scenarios": ["fixtures/onnxruntime/ort-genai-*.yaml", "fixtures/field/ort-genai-*.yaml"],
        "exclude": [],
    },
    "litert-lm-api": {
        "package": "litert-lm-api",
        "module": "litert_lm",
        "probe": "import litert_lm",
        "extra": [],
        "scenarios": ["fixtures/scenarios/litert-py-*.yaml"],
        "exclude": [],
    },
    "llama-cpp-python": {
        "package": "llama-cpp-python",
        # The server's scenarios start `python3 -m llama_cpp.server`: the extra's packages.
        "requirement": "llama-cpp-python[server]",
        "module": "llama_cpp",
        "probe": "import llama_cpp; llama_cpp.Llama(model_path='fixtures/models/tiny-llama.gguf', "
                 "n_ctx=128, n_threads=1, verbose=False)",
        "extra": [],
        "scenarios": ["fixtures/llama-cpp/*.yaml", "fixtures/llama-server/*.yaml"],
        "exclude": [],
        # A build for any x86-64 (not this CPU's extensions, as CI's machines differ) and without
        # the multimodal (llava/mtmd) library, which the drivers do not use.
        "source_build": {"CMAKE_ARGS": "-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF"},
    },
}

# How long building one release from source may take (17 minutes were seen on a loaded 2-core
# machine).
BUILD_TIMEOUT_S = 3600

# How long one release's whole library may take before the hunt stops it (SIGTERM: leakloop
# keeps what finished); a hang inside a scenario is already caught by its `call_timeout`.
RELEASE_TIMEOUT_S = 3600
METRICS = ("rss", "anon_rss", "native_heap")


class HuntError(Exception):
    """Bad usage: the hunt stops with exit code 2."""


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        return hunt(args)
    except HuntError as e:
        print(f"hunt: {e}", file=sys.stderr)
        return 2


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="hunt.py",
        description="Run each runtime's scenario library across its releases (docs/field-results.md).",
    )
    p.add_argument("--out", help="folder for hunt.md, hunt.json and the runs (absent or empty)")
    p.add_argument("--runtime", action="append", choices=sorted(RUNTIMES),
                   help="a runtime to hunt (repeatable; default: all)")
    p.add_argument("--release", action="append",
                   help="installed, newest, minors, all or a version (repeatable; default: newest)")
    p.add_argument("--only", action="append",
                   help="run only scenarios whose file name contains this (repeatable)")
    p.add_argument("--turns", type=int, help="override every scenario's measured turns")
    p.add_argument("--leakloop", help="the leakloop binary (default: target/release/leakloop, "
                   "else target/debug/leakloop)")
    p.add_argument("--venvs", default=os.path.join(ROOT, "target", "hunt", "venvs"),
                   help="where the per-release environments live (reused between hunts)")
    p.add_argument("--release-timeout", type=int, default=RELEASE_TIMEOUT_S,
                   help="seconds one release's library may run (default %(default)s)")
    p.add_argument("--list", action="store_true",
                   help="only list each runtime's releases and whether they install here")
    p.add_argument("--merge", nargs="+", metavar="HUNT_JSON",
                   help="run nothing: write one table into --out from earlier hunts' hunt.json")
    args = p.parse_args(argv)
    if not args.list and not args.out:
        p.error("--out is required (or --list)")
    return args


# --- releases -------------------------------------------------------------------------------

def published(package: str) -> list[str]:
    """The releases PyPI lists for `package`, newest first (pip's own index query)."""
    out = run_pip(sys.executable, ["index", "versions", package])
    for line in out.stdout.splitlines():
        if line.startswith("Available versions:"):
            return [v.strip() for v in line.split(":", 1)[1].split(",") if v.strip()]
    raise HuntError(f"pip lists no releases of {package}: {last_line(out.stderr or out.stdout)}")


def version_key(v: str):
    return tuple(int(x) if x.isdigit() else 0 for x in re.split(r"[.]", v))


def newest_per_minor(versions: list[str]) -> list[str]:
    seen, picked = set(), []
    for v in sorted(versions, key=version_key, reverse=True):
        minor = tuple(v.split(".")[:2])
        if minor not in seen:
            seen.add(minor)
            picked.append(v)
    return picked


def choose_releases(package: str, specs: list[str]) -> list[str]:
    chosen: list[str] = []
    listed = None
    for spec in specs:
        if spec == "installed":
            picked = ["installed"]
        else:
            listed = listed if listed is not None else published(package)
            if spec == "newest":
                picked = listed[:1]
            elif spec == "all":
                picked = listed
            elif spec == "minors":
                picked = newest_per_minor(listed)
            elif spec in listed:
                picked = [spec]
            else:
                raise HuntError(f"{package} has no release {spec!r} on PyPI "
                                f"(it lists {', '.join(listed[:8])}, ...)")
        chosen += [v for v in picked if v not in chosen]
    return chosen


def installs_here(package: str, version: str) -> tuple[bool, str]:
    """Whether pip finds a wheel of `package==version` for this Python (dry run, metadata only)."""
    with tempfile.TemporaryDirectory() as target:
        out = run_pip(sys.executable, ["install", "--dry-run", "--no-deps", "--only-binary=:all:",
                                       "--ignore-installed", "--target", target,
                                       f"{package}=={version}"])
    return out.returncode == 0, last_line(out.stderr)


# --- environments ---------------------------------------------------------------------------

def run_pip(python: str, args: list[str], timeout: int = 900,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """This Python's pip, acting on `python`'s environment (`env`: added to the environment)."""
    return subprocess.run([sys.executable, "-m", "pip", "--python", python,
                           "--disable-pip-version-check", "--no-input", *args],
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **env} if env else None)


def install_command(runtime: str, release: str) -> tuple[list[str], dict[str, str], int]:
    """pip's arguments installing `release` of `runtime`, the environment they need and their
    timeout: wheels only, except the runtime itself where it is built from its source."""
    spec = RUNTIMES[runtime]
    args = ["install", "--only-binary=:all:"]
    build = spec.get("source_build")
    if build is not None:
        # pip lets a package's own --no-binary win over `:all:`; its build dependencies (cmake,
        # ninja, scikit-build-core) still come as wheels.
        args.append(f"--no-binary={spec['package']}")
    requirement = spec.get("requirement", spec["package"])
    args += [f"{requirement}=={release}", *spec["extra"]]
    return args, dict(build or {}), BUILD_TIMEOUT_S if build is not None else 900


def last_line(text: str) -> str:
    lines = [l.strip() for l in (text or "").splitlines() if l.strip()]
    return lines[-1] if lines else ""


def import_error(python: str, module: str) -> str | None:
    """None when `python` imports `module`, else the error's last line."""
    out = subprocess.run([python, "-c", f"import {module}"], capture_output=True, text=True,
                         timeout=300)
    if out.returncode == 0:
        return None
    return last_line(out.stderr or out.stdout) or f"exit code {out.returncode}"


def needs_numpy1(python: str, probe: str) -> bool:
    """Whether the runtime's probe (import, and a model built where that needs NumPy) fails
    because the wheel was built against NumPy 1 and NumPy 2 is installed (NumPy's own message)."""
    out = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=300,
                         cwd=ROOT)
    return out.returncode != 0 and "compiled using NumPy 1.x" in (out.stderr + out.stdout)


def freeze(python: str) -> dict[str, str]:
    out = run_pip(python, ["list", "--format", "json"])
    try:
        # Normalised as PyPI does: pip lists a source-built llama-cpp-python as llama_cpp_python.
        return {re.sub(r"[-_.]+", "-", p["name"]).lower(): p["version"]
                for p in json.loads(out.stdout)}
    except (ValueError, KeyError, TypeError):
        return {}


def prepare(runtime: str, release: str, venvs: str) -> dict:
    """The environment for one release: {status, python?, bin?, error?, packages, notes}.

    status is `ready`, `no install` (pip found nothing for this Python) or `no import`."""
    spec = RUNTIMES[runtime]
    if release == "installed":
        python = sys.executable
        error = import_error(python, spec["module"])
        packages = freeze(python)
        if error:
            return {"status": "no import", "error": error, "packages": {}, "notes": []}
        return {"status": "ready", "python": python, "bin": None,
                "release": packages.get(spec["package"], "unknown"),
                "packages": pick(packages, runtime), "notes": ["this machine's python3"]}
    home = os.path.join(venvs, f"{runtime}-{release}")
    python = os.path.join(home, "bin", "python3")
    notes = []
    if not os.path.exists(os.path.join(home, ".hunt-ready")):
        # Without pip of its own (ensurepip takes long on a busy machine): this Python's pip
        # installs into it (`pip --python`).
        subprocess.run([sys.executable, "-m", "venv", "--clear", "--without-pip", home],
                       check=True, capture_output=True, timeout=300)
        if spec.get("source_build") is not None:
            print(f"hunt: {runtime} {release}: building from source (minutes)", file=sys.stderr,
                  flush=True)
        install, build_env, timeout = install_command(runtime, release)
        out = run_pip(python, install, timeout=timeout, env=build_env)
        if out.returncode != 0:
            return {"status": "no install", "error": pip_reason(out.stderr), "packages": {},
                    "notes": []}
        if needs_numpy1(python, spec["probe"]):
            run_pip(python, ["install", "--only-binary=:all:", "numpy<2"])
            notes.append("needs numpy<2: built against NumPy 1, fails with the NumPy 2 pip picks")
        error = import_error(python, spec["module"])
        if error:
            return {"status": "no import", "error": error, "packages": {}, "notes": notes}
        with open(os.path.join(home, ".hunt-ready"), "w") as f:
            json.dump({"notes": notes}, f)
    else:
        with open(os.path.join(home, ".hunt-ready")) as f:
            notes = json.load(f).get("notes", [])
        # An environment an older hunt prepared (before its probe built a model) is checked too.
        if needs_numpy1(python, spec["probe"]):
            run_pip(python, ["install", "--only-binary=:all:", "numpy<2"])
            notes.append("needs numpy<2: built against NumPy 1, fails with the NumPy 2 pip picks")
            with open(os.path.join(home, ".hunt-ready"), "w") as f:
                json.dump({"notes": notes}, f)
    return {"status": "ready", "python": python, "bin": os.path.join(home, "bin"),
            "release": release, "packages": pick(freeze(python), runtime), "notes": notes}


def pick(packages: dict[str, str], runtime: str) -> dict[str, str]:
    """The packages worth naming in a row: the runtime's own, onnxruntime under genai, numpy."""
    names = {RUNTIMES[runtime]["package"], "onnxruntime", "numpy"}
    return {n: v for n, v in sorted(packages.items()) if n in names}


def pip_reason(stderr: str) -> str:
    for line in (stderr or "").splitlines():
        if line.startswith("ERROR:"):
            return line[len("ERROR:"):].strip()
    return last_line(stderr)


# --- runs -----------------------------------------------------------------------------------

def scenarios_of(runtime: str, only: list[str] | None) -> list[str]:
    spec = RUNTIMES[runtime]
    found = sorted({p for g in spec["scenarios"] for p in glob.glob(os.path.join(ROOT, g))})
    found = [p for p in found if not any(x in os.path.basename(p) for x in spec["exclude"])]
    if only:
        found = [p for p in found if any(x in os.path.basename(p) for x in only)]
    return found


def expected_exit(path: str) -> int | None:
    """The exit code the scenario's `# Expected: ... (exit N)` header states."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("#") and "Expected" in line:
                m = re.search(r"\(exit (\d+)\)", line)
                if m:
                    return int(m.group(1))
    return None


def leakloop_binary(given: str | None) -> str:
    if given:
        return os.path.abspath(given)
    for profile in ("release", "debug"):
        path = os.path.join(ROOT, "target", profile, "leakloop")
        if os.access(path, os.X_OK):
            return path
    raise HuntError("no leakloop binary: run `cargo build -p leakloop` or give --leakloop")


def run_library(leakloop: str, env_bin: str | None, scenarios: list[str], out: str,
                turns: int | None, timeout: int) -> tuple[int | None, str]:
    """Runs the scenarios as one leakloop suite with the release's python3 first on PATH."""
    env = dict(os.environ)
    if env_bin:
        env["PATH"] = env_bin + os.pathsep + env.get("PATH", "")
        env["VIRTUAL_ENV"] = os.path.dirname(env_bin)
    env.pop("PYTHONHOME", None)
    command = [leakloop, "run", *scenarios, "--out", out]
    if turns is not None:
        command += ["--turns", str(turns)]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # SIGTERM lets leakloop keep every finished scenario's reports.
        proc.send_signal(signal.SIGTERM)
        try:
            stdout, stderr = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
        return None, f"stopped after {timeout} s: {last_line(stderr)}"
    return proc.returncode, last_line(stderr)


def read_json(path: str):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def scenario_result(suite_dir: str, entry: dict, scenario_path: str) -> dict:
    """One cell: what a scenario's report says, next to what its header expects."""
    expected = expected_exit(scenario_path)
    result = {
        "scenario": os.path.relpath(scenario_path, ROOT),
        "name": entry.get("name"),
        "status": entry.get("status"),
        "exit_code": entry.get("exit_code"),
        "expected_exit": expected,
        "as_expected": entry.get("exit_code") == expected,
        "error": entry.get("error"),
        "growth_per_turn": {},
        "classification": {},
        "unbalanced": [],
        "failure": None,
        "folder": entry.get("folder"),
    }
    read_report_into(result, os.path.join(suite_dir, entry.get("folder") or "", "report.json"))
    result["cell"] = cell(result)
    return result


def read_report_into(result: dict, path: str) -> None:
    """Adds what a scenario's report.json says to its result (nothing when it has none)."""
    report = read_json(path)
    if report:
        result.update(growth_per_turn={}, classification={}, unbalanced=[], failure=None)
        for name, metric in (report.get("verdict", {}).get("metrics") or {}).items():
            if name in METRICS:
                result["growth_per_turn"][name] = metric.get("slope_bytes_per_turn")
                result["classification"][name] = metric.get("classification")
        record = report.get("record", {})
        totals = (record.get("ledger") or {}).get("totals") or {}
        for kind, counts in sorted(totals.items()):
            if isinstance(counts, dict) and counts.get("created") != counts.get("deleted"):
                result["unbalanced"].append(
                    f"{kind} {counts.get('deleted')}/{counts.get('created')}")
        outcome = record.get("outcome") or {}
        if outcome.get("status") == "engine_failed":
            result["failure"] = failure_words(outcome)
        result["turns_completed"] = record.get("turns_completed")
        result["version"] = (record.get("backend") or {}).get("version")
        # Engine errors the scenario did not script: each is `[turn, step, error]`.
        errors = record.get("engine_errors") or []
        result["engine_errors"] = len(errors)
        if errors and isinstance(errors[0], list) and len(errors[0]) == 3:
            turn, step, error = errors[0]
            message = error.get("message", "") if isinstance(error, dict) else str(error)
            result["first_engine_error"] = {"turn": turn, "step": step, "message": message}


def failure_words(outcome: dict) -> dict:
    error = outcome.get("error") or {}
    kind = error.get("kind") or {}
    kind_name = kind.get("kind") if isinstance(kind, dict) else str(kind)
    message = (error.get("message") or "").strip()
    how = kind.get("how") if isinstance(kind, dict) else None
    waited = kind.get("waited_ms") if isinstance(kind, dict) else None
    if kind_name == "crashed":
        words = f"crash ({how or message})"
        if "stderr" in message:
            words += f": {short_error(message)}"
    elif kind_name == "hung":
        words = f"hang (no reply in {waited} ms)" if waited else "hang"
    elif kind_name in ("load", "unavailable"):
        words = f"does not load our model: {message}"
    else:
        words = f"{kind_name} error: {message}"
    return {"kind": kind_name, "turn": outcome.get("turn"), "step": outcome.get("step"),
            "message": message, "words": words}


def per_turn(value) -> str:
    """A growth per turn in the units leakloop's summaries use (B, KiB, MiB)."""
    if value is None:
        return "?"
    sign = "+" if value >= 0 else "-"
    v = abs(value)
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if v >= size:
            return f"{sign}{v / size:.1f} {unit}/turn"
    return f"{sign}{v:.0f} B/turn"


def short_error(text: str) -> str:
    """The part of an engine error that says why: the refusal a driver answered, or the last
    line of what a dying driver printed."""
    text = str(text).replace(ROOT + os.sep, "")
    for marker in ("answered `hello` with `failed`: ", "[ONNXRuntimeError] : "):
        if marker in text:
            return text.split(marker, 1)[1]
    if "last lines of the worker's stderr:" in text:
        tail = text.split("last lines of the worker's stderr:", 1)[1]
        lines = [l.strip(" |") for l in tail.splitlines() if l.strip(" |")]
        return lines[-1] if lines else text.splitlines()[0]
    return text


def cell(r: dict) -> str:
    status = (r.get("status") or "?").upper().replace("_", " ")
    parts = [f"{status} (exit {r.get('exit_code')})"]
    if r.get("failure"):
        f = r["failure"]
        parts.append(f"{f['words']} at turn {f['turn']} {f['step']}")
    elif r.get("error"):
        parts.append(short_error(r["error"]))
    if r.get("first_engine_error"):
        e = r["first_engine_error"]
        parts.append(f"{r['engine_errors']} engine errors, the first in turn {e['turn']} "
                     f"({e['step']}): {short_error(e['message'])[:200]}")
    growth = r["growth_per_turn"]
    worst = max((m for m in growth if growth[m] is not None), default=None,
                key=lambda m: growth[m])
    if worst and r.get("status") in ("fail", "pass", "inconclusive", "engine_failed"):
        parts.append(f"{worst} {per_turn(growth[worst])}")
    if r["unbalanced"]:
        parts.append("unbalanced " + ", ".join(r["unbalanced"]))
    if not r["as_expected"]:
        parts.append(f"**expected exit {r['expected_exit']}**")
    return "; ".join(parts)


def hunt_release(args, leakloop: str, runtime: str, release: str, out: str) -> dict:
    row = {"runtime": runtime, "package": RUNTIMES[runtime]["package"], "release": release}
    print(f"hunt: {runtime} {release}: preparing", file=sys.stderr, flush=True)
    try:
        env = prepare(runtime, release, args.venvs)
    except (subprocess.SubprocessError, OSError) as e:
        env = {"status": "no install", "error": str(e), "packages": {}, "notes": []}
    row.update(install=env["status"], install_error=env.get("error"),
               packages=env.get("packages", {}), notes=env.get("notes", []))
    row["release"] = env.get("release", release)
    row["scenarios"] = []
    if env["status"] != "ready":
        print(f"hunt: {runtime} {release}: {env['status']}: {env.get('error')}", file=sys.stderr)
        return row
    scenarios = scenarios_of(runtime, args.only)
    suite_dir = os.path.join(out, "runs", runtime, row["release"])
    os.makedirs(os.path.dirname(suite_dir), exist_ok=True)
    print(f"hunt: {runtime} {row['release']}: {len(scenarios)} scenarios", file=sys.stderr,
          flush=True)
    code, stderr = run_library(leakloop, env["bin"], scenarios, suite_dir, args.turns,
                               args.release_timeout)
    row["suite_exit_code"] = code
    suite = read_json(os.path.join(suite_dir, "report.json"))
    entries = {}
    if suite and suite.get("kind") == "leakloop-suite":
        for e in suite.get("scenarios", []):
            entries[e.get("name")] = e
            entries[e.get("path")] = e
    for path in scenarios:
        entry = None
        if len(scenarios) == 1:
            entry = single_entry(suite_dir, code)
        else:
            rel = os.path.basename(path)
            entry = next((e for p, e in entries.items() if p and p.endswith(rel)), None)
        if entry is None:
            entry = {"status": "not run", "exit_code": None,
                     "error": stderr or "the suite wrote no entry for it"}
        row["scenarios"].append(scenario_result(suite_dir, entry, path))
    return row


def single_entry(run_dir: str, code: int | None) -> dict | None:
    """A one-scenario run writes the run's report itself: read it as a suite entry."""
    report = read_json(os.path.join(run_dir, "report.json"))
    if not report or report.get("kind") == "leakloop-suite":
        return None
    verdict = report.get("verdict") or {}
    return {"name": (report.get("record") or {}).get("scenario", {}).get("name"),
            "folder": "", "status": verdict.get("status"), "exit_code": code, "error": None}


# --- the table ------------------------------------------------------------------------------

def provenance(leakloop: str) -> dict:
    def git(*a):
        out = subprocess.run(["git", "-C", ROOT, *a], capture_output=True, text=True)
        return out.stdout.strip() if out.returncode == 0 else None

    version = subprocess.run([leakloop, "--version"], capture_output=True, text=True)
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "leakloop_commit": git("rev-parse", "--short=12", "HEAD"),
        "leakloop_tree_dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
        "leakloop": version.stdout.strip(),
        "python": platform.python_version(),
        "machine": f"{platform.system()} {platform.release()} {platform.machine()}, "
                   f"{os.cpu_count()} CPUs",
    }


def markdown(doc: dict) -> str:
    p = doc["provenance"]
    lines = [
        "# Leak hunt",
        "",
        f"{p['date']}; leakloop {p['leakloop_commit']}"
        f"{' (with local changes)' if p['leakloop_tree_dirty'] else ''} ({p['leakloop']}); "
        f"Python {p['python']}; {p['machine']}.",
        "Each cell: the verdict (exit code), the failure if the engine failed, the largest growth "
        "per turn of rss, anon_rss and native_heap, the unbalanced ledger kinds (deleted/created); "
        "**expected exit N** marks a result that differs from the scenario's header.",
    ]
    for runtime in dict.fromkeys(r["runtime"] for r in doc["releases"]):
        rows = [r for r in doc["releases"] if r["runtime"] == runtime]
        names = list(dict.fromkeys(s["name"] or os.path.basename(s["scenario"])
                                   for r in rows for s in r["scenarios"]))
        lines += ["", f"## {runtime}", "", "| release | install | " + " | ".join(names) + " |",
                  "| --- | --- |" + " --- |" * len(names)]
        for r in rows:
            install = r["install"] if r["install"] != "ready" else "ok"
            if r.get("install_error"):
                install += f": {escape(r['install_error'])}"
            if r.get("notes"):
                install += " (" + "; ".join(r["notes"]) + ")"
            by_name = {(s["name"] or os.path.basename(s["scenario"])): s for s in r["scenarios"]}
            cells = [escape(by_name[n]["cell"]) if n in by_name else "-" for n in names]
            lines.append(f"| {r['release']} | {install} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def escape(text: str) -> str:
    """Foreign text (pip's and the runtimes' messages) inside a Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")[:300]


def hunt(args) -> int:
    runtimes = args.runtime or list(RUNTIMES)
    specs = args.release or ["newest"]
    if args.list:
        for runtime in runtimes:
            package = RUNTIMES[runtime]["package"]
            for v in choose_releases(package, [s for s in specs if s != "installed"] or ["all"]):
                if RUNTIMES[runtime].get("source_build") is not None:
                    print(f"{runtime}\t{v}\tsource distribution (built at install)")
                    continue
                ok, why = installs_here(package, v)
                print(f"{runtime}\t{v}\t{'installs' if ok else 'no wheel: ' + why}")
        return 0
    out = os.path.abspath(args.out)
    if os.path.exists(out) and (not os.path.isdir(out) or os.listdir(out)):
        raise HuntError(f"--out {args.out} exists and is not an empty folder")
    if args.merge:
        return merge(args.merge, out)
    leakloop = leakloop_binary(args.leakloop)
    # Some old LiteRT-LM wheels (a default.profraw appeared while 0.10.1 to 0.13.0 ran) carry
    # LLVM's profile runtime, which writes that file into the working folder at exit (the
    # scenario's folder, for a driver): every process the hunt starts is given a file inside
    # --out instead.
    os.environ["LLVM_PROFILE_FILE"] = os.path.join(out, "profraw", "%p.profraw")
    plan = [(rt, rel) for rt in runtimes for rel in choose_releases(RUNTIMES[rt]["package"], specs)]
    os.makedirs(out, exist_ok=True)
    doc = {"kind": "leakloop-hunt", "provenance": provenance(leakloop), "releases": []}
    for runtime, release in plan:
        if not scenarios_of(runtime, args.only):
            continue
        doc["releases"].append(hunt_release(args, leakloop, runtime, release, out))
        # Written after every release, so that a stopped hunt keeps what it found.
        write(out, doc)
    write(out, doc)
    print(markdown(doc))
    return 0


def merge(paths: list[str], out: str) -> int:
    """One table from several hunts (e.g. run side by side, one per runtime): their releases in
    the order given, each cell worded again; the provenance is the first hunt's, and every
    hunt's is kept under `merged`."""
    docs = []
    for path in paths:
        doc = read_json(path)
        if not doc or doc.get("kind") != "leakloop-hunt":
            raise HuntError(f"{path} is not a hunt.json")
        docs.append(doc)
    merged = {"kind": "leakloop-hunt", "provenance": docs[0]["provenance"],
              "merged": [d["provenance"] for d in docs], "releases": []}
    for path, doc in zip(paths, docs):
        runs = os.path.join(os.path.dirname(os.path.abspath(path)), "runs")
        for row in doc["releases"]:
            for result in row["scenarios"]:
                # Read the reports again where they are kept (an older hunt may have read less).
                folder = result.get("folder")
                if folder is None:
                    stem = os.path.splitext(os.path.basename(result["scenario"]))[0]
                    found = glob.glob(os.path.join(runs, row["runtime"], row["release"],
                                                   f"*{stem}"))
                    folder = os.path.basename(found[0]) if len(found) == 1 else None
                if folder is not None:
                    read_report_into(result, os.path.join(runs, row["runtime"], row["release"],
                                                          folder, "report.json"))
                result["cell"] = cell(result)
            merged["releases"].append(row)
    os.makedirs(out, exist_ok=True)
    write(out, merged)
    print(markdown(merged))
    return 0


def write(out: str, doc: dict) -> None:
    with open(os.path.join(out, "hunt.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
    with open(os.path.join(out, "hunt.md"), "w", encoding="utf-8") as f:
        f.write(markdown(doc))


if __name__ == "__main__":
    sys.exit(main())
