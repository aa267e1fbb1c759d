#!/usr/bin/env python3
"""A leakloop engine driver over LiteRT-LM's Python package (`litert_lm`, wheel `litert-lm-api`).

The package is a ctypes binding over the same `liblitert-lm.so` that leakloop's `litert-lm`
backend drives directly, so running one scenario through both shows whether the binding layer
adds memory of its own. The driver speaks leakloop's worker protocol (docs/protocol.md, version 1):
one JSON object per line, a request on stdin, exactly one reply on stdout.

Ledger: every C handle the binding creates or deletes is counted at the ctypes boundary (the
package's functions are wrapped once, at start), under the kinds the `litert-lm` backend uses
(`engine`, `conversation`, `response`, ...), so a handle the binding frees late (from a
finaliser) or never is seen where it happens. The Python wrapper objects are counted too
(`py_engine`, `py_conversation`): created when built, deleted when Python actually frees them.

How the driver lets go of a conversation is chosen on the command line, to reproduce how
applications use the binding:

  --release close   `close_session` calls `Conversation.close()` (the documented way)
  --release drop    `close_session` only drops the driver's reference; the C conversation is freed
                    whenever Python finalises the wrapper (reference count or cyclic GC)
  --gc off          the cyclic garbage collector is disabled (`gc.disable()`), as some
                    latency-sensitive applications do
  --abandon-stream  a `cancel_after_tokens` generation stops reading the stream after K chunks
                    without calling `cancel_process()` (an application that breaks out of the
                    iterator), instead of cancelling it

Whatever the native library prints goes to stderr: file descriptor 1 is moved aside for the
protocol before the library loads.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import weakref

PROTOCOL_VERSION = 1
BACKEND = "litert-lm-python"
MAX_LINE_BYTES = 16 << 20

# C functions that create a handle, by the ledger kind of what they return, and the functions that
# delete one. Kind names are those of leakloop's `litert-lm` backend, so the two ledgers line up.
CREATORS = {
    "litert_lm_engine_settings_create": "settings",
    "litert_lm_engine_create": "engine",
    "litert_lm_session_config_create": "session_config",
    "litert_lm_conversation_config_create": "conversation_config",
    "litert_lm_conversation_create": "conversation",
    "litert_lm_conversation_send_message": "response",
    "litert_lm_sampler_params_create": "sampler_params",
    "litert_lm_conversation_optional_args_create": "optional_args",
    "litert_lm_engine_tokenize": "tokenize_result",
}
DELETERS = {
    "litert_lm_engine_settings_delete": "settings",
    "litert_lm_engine_delete": "engine",
    "litert_lm_session_config_delete": "session_config",
    "litert_lm_conversation_config_delete": "conversation_config",
    "litert_lm_conversation_delete": "conversation",
    "litert_lm_json_response_delete": "response",
    "litert_lm_sampler_params_delete": "sampler_params",
    "litert_lm_conversation_optional_args_delete": "optional_args",
    "litert_lm_tokenize_result_delete": "tokenize_result",
}


class DriverError(Exception):
    """A failed call: `kind` is one of the protocol's error kinds (`load`, `generate`, ...)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class Ledger:
    """Cumulative created/deleted counts per kind; finalisers may run on any thread."""

    def __init__(self):
        self._lock = threading.Lock()
        self._counts: dict[str, list[int]] = {}

    def created(self, kind: str) -> None:
        with self._lock:
            self._counts.setdefault(kind, [0, 0])[0] += 1

    def deleted(self, kind: str) -> None:
        with self._lock:
            self._counts.setdefault(kind, [0, 0])[1] += 1

    def snapshot(self) -> dict:
        with self._lock:
            return {
                kind: {"created": c, "deleted": d} for kind, (c, d) in self._counts.items()
            }


def count_handles(lib, ledger: Ledger) -> None:
    """Wraps the binding's C functions so that every handle created or deleted is counted.

    ctypes caches a function on first attribute access; setting the attribute replaces that for
    every later `lib.name(...)` call the package makes.
    """

    def creator(fn, kind):
        def call(*args):
            handle = fn(*args)
            if handle:
                ledger.created(kind)
            return handle

        return call

    def deleter(fn, kind):
        def call(*args):
            if args and args[0]:
                ledger.deleted(kind)
            return fn(*args)

        return call

    for name, kind in CREATORS.items():
        setattr(lib, name, creator(getattr(lib, name), kind))
    for name, kind in DELETERS.items():
        setattr(lib, name, deleter(getattr(lib, name), kind))


def native_heap_bytes() -> int | None:
    """The process's C heap in use (glibc `mallinfo2`: uordblks + hblkhd), as leakloop's worker."""

    class MallInfo2(ctypes.Structure):
        _fields_ = [
            (name, ctypes.c_size_t)
            for name in (
                "arena", "ordblks", "smblks", "hblks", "hblkhd",
                "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost",
            )
        ]

    try:
        libc = ctypes.CDLL(None)
        mallinfo2 = libc.mallinfo2
    except (OSError, AttributeError):
        return None
    mallinfo2.restype = MallInfo2
    info = mallinfo2()
    return int(info.uordblks + info.hblkhd)


def reply_text(message) -> str:
    """The text of a `litert_lm.Message` reply (or streamed chunk)."""
    if isinstance(message, dict):
        data = message
    elif hasattr(message, "to_json"):
        data = message.to_json()
    else:
        return str(message)
    content = data.get("content", "")
    if isinstance(content, str):
        return content
    return "".join(
        part.get("text", "") for part in content if isinstance(part, dict)
    )


class Driver:
    """One engine over `litert_lm`, answering the protocol's calls."""

    def __init__(self, scenario: dict, options: argparse.Namespace, litert_lm):
        self.lm = litert_lm
        self.options = options
        self.scenario = scenario
        engine = scenario.get("engine") or {}
        self.model = engine.get("model")
        self.device = engine.get("device", "cpu")
        self.max_tokens = engine.get("max_tokens")
        self.faults = {
            (f.get("at_turn"), f.get("kind")) for f in scenario.get("faults") or []
        }
        self.ledger = Ledger()
        from litert_lm import _ffi  # the package's own loader: one library per process

        self.lib = _ffi._get_lib()
        count_handles(self.lib, self.ledger)
        self.engine = None
        self.workdir = None
        self.sessions: dict[int, dict] = {}
        self.next_session = 1

    # --- identity -------------------------------------------------------------------------

    def describe(self) -> dict:
        try:
            from importlib.metadata import version

            package = version("litert-lm-api")
        except Exception:  # noqa: BLE001 - any failure just leaves the version unknown
            package = "unknown"
        details = {
            "library": getattr(self.lib, "_name", "") or "",
            "python": sys.version.split()[0],
            "device": str(self.device),
            "model": str(self.model),
            "release": self.options.release,
            "gc": self.options.gc,
            "cancel": "abandon" if self.options.abandon_stream else "cancel_process",
        }
        if self.max_tokens is not None:
            details["max_tokens"] = str(self.max_tokens)
        return {"backend": BACKEND, "version": package, "details": details}

    # --- calls ----------------------------------------------------------------------------

    def load(self) -> dict:
        if self.engine is not None:
            raise DriverError("load", "the engine is already loaded")
        if not self.model:
            raise DriverError("unavailable", "the scenario names no engine.model")
        if not os.path.isfile(self.model):
            raise DriverError("unavailable", f"model file not found: {self.model}")
        # The engine writes caches next to its model: a private copy keeps the source tree clean.
        self.workdir = tempfile.mkdtemp(prefix="leakloop-litert-py-")
        model = os.path.join(self.workdir, os.path.basename(self.model))
        shutil.copyfile(self.model, model)
        backend = self.lm.Backend.GPU() if self.device == "gpu" else self.lm.Backend.CPU()
        try:
            engine = self.lm.Engine(
                model, backend=backend, max_num_tokens=self.max_tokens, cache_dir=self.workdir
            )
        except Exception as e:  # noqa: BLE001 - the binding raises RuntimeError and others
            raise DriverError("load", f"litert_lm.Engine: {e}") from e
        self._track(engine, "py_engine")
        self.engine = engine
        return {"reply": "loaded", "backend": self.describe()}

    def open_session(self, turn: int, options: dict) -> dict:
        if self.engine is None:
            raise DriverError("open", "no engine is loaded")
        sampler = None
        chosen = {
            key: options[key]
            for key in ("temperature", "top_k", "top_p", "seed")
            if options.get(key) is not None
        }
        if chosen:
            try:
                sampler = self.lm.SamplerConfig(**chosen)
            except (TypeError, ValueError) as e:
                raise DriverError("open", f"sampler options {chosen}: {e}") from e
        try:
            conversation = self.engine.create_conversation(sampler_config=sampler)
        except Exception as e:  # noqa: BLE001
            raise DriverError("open", f"create_conversation: {e}") from e
        self._track(conversation, "py_conversation")
        session = self.next_session
        self.next_session += 1
        self.sessions[session] = {"conversation": conversation, "turn": turn, "prompt": None}
        return {"reply": "opened", "session": session}

    def send(self, session: int, prompt: dict) -> dict:
        entry = self._session(session, "send")
        # Like the C API backend: the prompt is sent with the generation that answers it.
        entry["prompt"] = prompt.get("text", "")
        return {"reply": "done"}

    def generate(self, session: int, request: dict) -> dict:
        entry = self._session(session, "generate")
        self._strike_process_faults(entry["turn"])
        conversation = entry["conversation"]
        text = entry["prompt"] or ""
        entry["prompt"] = None
        limit = request.get("max_output_tokens")
        cancel_after = request.get("cancel_after_tokens")
        try:
            if cancel_after is None:
                reply = conversation.send_message(text, max_output_tokens=limit)
                tokens = len(self.engine.tokenize(reply_text(reply))) if self.engine else 0
                return {"reply": "generated", "outcome": {"tokens": tokens, "cancelled": False}}
            return self._stream(conversation, text, limit, cancel_after)
        except DriverError:
            raise
        except Exception as e:  # noqa: BLE001
            raise DriverError("generate", f"send_message: {e}") from e

    def _stream(self, conversation, text: str, limit, cancel_after: int) -> dict:
        chunks = 0
        cancelled = False
        stream = conversation.send_message_async(text, max_output_tokens=limit)
        for _chunk in stream:
            chunks += 1
            if chunks >= cancel_after:
                cancelled = True
                if self.options.abandon_stream:
                    break
                conversation.cancel_process()
                # The stream ends once the engine has stopped; chunks already on their way are
                # drained so that the next call starts on a quiet conversation.
                for _late in stream:
                    pass
                break
        return {
            "reply": "generated",
            "outcome": {"tokens": min(chunks, cancel_after), "cancelled": cancelled},
        }

    def close_session(self, session: int) -> dict:
        entry = self.sessions.pop(session, None)
        if entry is None:
            raise DriverError("close", f"no open session {session}")
        conversation = entry.pop("conversation")
        if self.options.release == "close":
            try:
                conversation.close()
            except Exception as e:  # noqa: BLE001
                raise DriverError("close", f"Conversation.close: {e}") from e
        # With `--release drop` the last reference goes here: what frees the C conversation now
        # is Python's reference count, or the cyclic collector if the wrapper is in a cycle.
        del conversation
        return {"reply": "done"}

    def unload(self) -> dict:
        if self.engine is None:
            raise DriverError("unload", "no engine is loaded")
        engine, self.engine = self.engine, None
        try:
            engine.close()
        except Exception as e:  # noqa: BLE001
            raise DriverError("unload", f"Engine.close: {e}") from e
        del engine
        # Conversations the runner left open (a `skip_close` fault) stay in the table: the
        # binding has just deleted the engine under them, which is what this measures.
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None
        return {"reply": "done"}

    def snapshot(self) -> dict:
        metrics = {}
        heap = native_heap_bytes()
        if heap is not None:
            metrics["native_heap"] = heap
        return {"reply": "snapshot", "snapshot": {"ledger": self.ledger.snapshot(), "metrics": metrics}}

    def idle(self, duration: dict) -> dict:
        time.sleep(duration.get("secs", 0) + duration.get("nanos", 0) / 1e9)
        return {"reply": "done"}

    # --- helpers --------------------------------------------------------------------------

    def _session(self, session: int, call: str) -> dict:
        entry = self.sessions.get(session)
        if entry is None:
            raise DriverError(call, f"no open session {session}")
        return entry

    def _track(self, obj, kind: str) -> None:
        self.ledger.created(kind)
        weakref.finalize(obj, self.ledger.deleted, kind)

    def _strike_process_faults(self, turn: int) -> None:
        # As in leakloop's own worker: process faults strike when the faulted turn generates.
        if (turn, "crash") in self.faults:
            signal.signal(signal.SIGABRT, signal.SIG_DFL)
            os.abort()
        if (turn, "hang") in self.faults:
            threading.Event().wait()


def failed(kind: str, message: str) -> dict:
    return {"reply": "failed", "error": {"kind": kind, "message": message}}


def dispatch(driver: Driver, request: dict) -> dict:
    call = request.get("call")
    if call == "load":
        return driver.load()
    if call == "open_session":
        return driver.open_session(request["turn"], request.get("options") or {})
    if call == "send":
        return driver.send(request["session"], request["prompt"])
    if call == "generate":
        return driver.generate(request["session"], request["request"])
    if call == "close_session":
        return driver.close_session(request["session"])
    if call == "unload":
        return driver.unload()
    if call == "snapshot":
        return driver.snapshot()
    if call == "idle":
        return driver.idle(request["duration"])
    raise DriverError("protocol", f"unknown call `{call}`")


def answer(out, body: dict) -> None:
    out.write(json.dumps({"clock_ms": None, "body": body}, separators=(",", ":")) + "\n")
    out.flush()


def read_request(stream):
    line = stream.readline(MAX_LINE_BYTES + 1)
    if not line:
        return None
    if len(line) > MAX_LINE_BYTES:
        raise DriverError("protocol", f"request line longer than {MAX_LINE_BYTES} bytes")
    try:
        request = json.loads(line)
    except json.JSONDecodeError as e:
        raise DriverError("protocol", f"malformed protocol line `{line.strip()[:120]}`: {e}") from e
    if not isinstance(request, dict) or "call" not in request:
        raise DriverError("protocol", f"not a request: `{line.strip()[:120]}`")
    return request


def protocol_stdout():
    """Moves the protocol off file descriptor 1, which then points at stderr."""
    sys.stdout.flush()
    fd = os.dup(1)
    os.set_inheritable(fd, False)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(fd, "w", encoding="utf-8")


def serve(stdin, out, options: argparse.Namespace) -> int:
    try:
        first = read_request(stdin)
    except DriverError as e:
        answer(out, failed(e.kind, str(e)))
        return 1
    if first is None:
        return 0
    if first.get("call") != "hello":
        answer(out, failed("protocol", f"the first request must be `hello`, got `{first.get('call')}`"))
        return 1
    if first.get("version") != PROTOCOL_VERSION:
        answer(out, failed("protocol", "protocol version mismatch: the runner speaks "
                           f"{first.get('version')}, this driver speaks {PROTOCOL_VERSION}"))
        return 1
    scenario = first.get("scenario")
    if not isinstance(scenario, dict):
        answer(out, failed("protocol", "no scenario in the hello request"))
        return 1
    try:
        import litert_lm
    except ImportError as e:
        answer(out, failed("unavailable", f"cannot import litert_lm ({e}); "
                           "install it: python3 -m pip install litert-lm-api==0.18.1"))
        return 1
    try:
        driver = Driver(scenario, options, litert_lm)
    except Exception as e:  # noqa: BLE001
        answer(out, failed("unavailable", f"cannot load the LiteRT-LM library: {e}"))
        return 1
    answer(out, {"reply": "hello", "version": PROTOCOL_VERSION, "pid": os.getpid(),
                 "backend": driver.describe()})
    while True:
        try:
            request = read_request(stdin)
        except DriverError as e:
            answer(out, failed(e.kind, str(e)))
            return 1
        if request is None:
            return 0
        try:
            body = dispatch(driver, request)
        except DriverError as e:
            body = failed(e.kind, str(e))
        except (KeyError, TypeError) as e:
            body = failed("protocol", f"bad `{request.get('call')}` request: {e!r}")
        answer(out, body)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--release", choices=["close", "drop"], default="close",
                        help="how close_session lets go of a conversation (default: close)")
    parser.add_argument("--gc", choices=["on", "off"], default="on",
                        help="whether Python's cyclic garbage collector runs (default: on)")
    parser.add_argument("--abandon-stream", action="store_true",
                        help="stop reading a stream after K chunks instead of cancel_process()")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    options = parse_args(sys.argv[1:] if argv is None else argv)
    if options.gc == "off":
        gc.disable()
    out = protocol_stdout()
    return serve(sys.stdin, out, options)


if __name__ == "__main__":
    sys.exit(main())
