#!/usr/bin/env python3
"""A leakloop engine driver over LiteRT-LM's Python package (`litert_lm`, wheel `litert-lm-api`).

The package is a ctypes binding over the same `liblitert-lm.so` that leakloop's `litert-lm`
backend drives directly, so running one scenario through both shows whether the binding layer
adds memory of its own. The driver speaks leakloop's worker protocol (docs/protocol.md, version 2):
one JSON object per line, a request on stdin, exactly one reply on stdout.

Ledger: every C handle the binding creates or deletes is counted at the ctypes boundary (the
package's functions are wrapped once, at start), under the kinds the `litert-lm` backend uses
(`engine`, `conversation`, `response`, ...), so a handle the binding frees late (from a
finaliser) or never is seen where it happens.

Options (the scenario's `engine.options`, sent in `hello`) reproduce how applications use the
binding:

  release: close      `close_session` calls `Conversation.close()` (the default, documented way)
  release: drop       `close_session` only drops the driver's reference; the C conversation is
                      freed whenever Python finalises the wrapper (reference count or cyclic GC)
  gc: off             the cyclic garbage collector is disabled (`gc.disable()`), as some
                      latency-sensitive applications do (default `on`)
  abandon_stream: true  a `cancel_after_tokens` generation stops reading the stream after K
                      chunks without calling `cancel_process()` (an application that breaks out
                      of the iterator)
  at_unload: keep     conversations still open when the engine is unloaded stay as they are (the
                      default: the binding's Engine.close() deletes the engine under them)
  at_unload: close    ...and are then closed, engine first, conversations after
  at_unload: drop     ...and are then dropped, left to the garbage collector
  count_wrappers: true  also count the Python wrapper objects (`py_engine`, `py_conversation`):
                      created when built, deleted when Python actually frees them
  keep_chunks: true   a generation without cancellation streams its reply and appends every
                      chunk to a list the driver never clears (an application that keeps a
                      transcript it never trims): a Python-level leak

Allocation sites (`run --attribute`): every driver built on this module's helpers (`CommonCalls`,
`serve`) offers the protocol's `sites` capability through Python's `tracemalloc`
(docs/protocol.md, "Allocation sites").

Whatever the native library prints goes to stderr: file descriptor 1 is moved aside for the
protocol before the library loads.
"""

from __future__ import annotations

import ast
import ctypes
from dataclasses import dataclass
import gc
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import tracemalloc
import weakref

PROTOCOL_VERSION = 2
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


@dataclass(frozen=True)
class Options:
    """The driver's options, from the `options` of the `hello` request's engine."""

    release: str = "close"
    gc: str = "on"
    abandon_stream: bool = False
    at_unload: str = "keep"
    count_wrappers: bool = False
    keep_chunks: bool = False

    CHOICES = {
        "release": ("close", "drop"),
        "gc": ("on", "off"),
        "abandon_stream": (True, False),
        "at_unload": ("keep", "close", "drop"),
        "count_wrappers": (True, False),
        "keep_chunks": (True, False),
    }

    @classmethod
    def parse(cls, given) -> "Options":
        """Options from `engine.options`; an unknown name or value is refused (`unavailable`)."""
        if given is None:
            return cls()
        if not isinstance(given, dict):
            raise DriverError("unavailable", f"engine.options must be a mapping, got {given!r}")
        for name, value in given.items():
            choices = cls.CHOICES.get(name)
            if choices is None:
                known = ", ".join(cls.CHOICES)
                raise DriverError("unavailable", f"unknown option `{name}` (this driver knows {known})")
            if value not in choices or type(value) is not type(choices[0]):
                allowed = " or ".join(json.dumps(c) for c in choices)
                raise DriverError("unavailable", f"option `{name}`: {json.dumps(value)} is not {allowed}")
        return cls(**given)


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


# The runner's caps on a `snapshot` reply's `sites` (docs/protocol.md, "Allocation sites").
MAX_SITES = 4096
MAX_FRAMES = 64
MAX_TEXT_BYTES = 4096
# Functions of the drivers' own files that are plumbing (the serve loop), never a site: an
# allocation under them is counted to the driver code they call.
PLUMBING = frozenset({"<module>", "main", "run_main", "serve", "dispatch", "answer", "read_request"})
# The helper's own measuring (the snapshot, the sites, their function names): memory allocated
# under them is not the code under test's, and is left out.
MEASURING = frozenset({
    "CommonCalls.snapshot", "CommonCalls.start_sites", "allocation_sites", "site_frames",
    "function_at", "function_at.walk",
})
_FUNCTIONS: dict[str, list] = {}


def function_at(filename: str, line: int) -> str:
    """The qualified name of the function (or `<module>`) that holds `line` of `filename`, read
    from the file's syntax tree once per file (tracemalloc records only file and line)."""
    table = _FUNCTIONS.get(filename)
    if table is None:
        table = []
        try:
            with open(filename, "rb") as source:
                tree = ast.parse(source.read())
        except (OSError, SyntaxError, ValueError):
            tree = None

        def walk(node, prefix):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    name = prefix + child.name
                    if not isinstance(child, ast.ClassDef):
                        table.append((child.lineno, child.end_lineno or child.lineno, name))
                    walk(child, name + ".")
                else:
                    walk(child, prefix)

        if tree is not None:
            walk(tree, "")
        _FUNCTIONS[filename] = table
    best = None
    for start, end, name in table:
        if start <= line <= end and (best is None or start >= best[0]):
            best = (start, name)
    return best[1] if best else "<module>"


def site_frames(traceback, own: set) -> tuple | None:
    """A tracemalloc traceback (oldest frame first) as a site: `(file, line, function)` frames,
    innermost first, starting at the innermost frame of the driver's own code (`own`: its files)
    so that what a library allocates for the driver's line is counted to that line; the serve
    loop's frames left out. `None` for the helper's own memory (its measuring)."""
    frames = []
    for frame in reversed(traceback):
        function = function_at(frame.filename, frame.lineno)
        mine = frame.filename in own
        if mine and function in MEASURING:
            return None
        if mine and function in PLUMBING:
            continue
        frames.append((frame.filename, frame.lineno, function, mine))
    if not frames:
        return None
    first = next((i for i, f in enumerate(frames) if f[3]), 0)
    return tuple(f[:3] for f in frames[first:first + MAX_FRAMES])


def allocation_sites(own: set) -> list:
    """Live bytes per site now, largest first, within the runner's caps."""
    sizes: dict = {}
    for stat in tracemalloc.take_snapshot().statistics("traceback"):
        frames = site_frames(stat.traceback, own)
        if frames is not None:
            sizes[frames] = sizes.get(frames, 0) + stat.size
    ranked = sorted(sizes.items(), key=lambda item: item[1], reverse=True)[:MAX_SITES]

    def text(value: str) -> str:
        # At most MAX_TEXT_BYTES in UTF-8 (4 bytes a character at most).
        return value[: MAX_TEXT_BYTES // 4]

    return [
        {"bytes": size,
         "frames": [{"file": text(f), "line": line, "function": text(fn)} for f, line, fn in frames]}
        for frames, size in ranked
    ]


class CommonCalls:
    """The calls every driver in this folder answers the same way: `snapshot` (its ledger and the
    process's native heap, and its allocation sites once `start_sites` came), `start_sites`
    (tracemalloc), `idle`, and finding an open session (`self.sessions`) by its number. A driver
    class derives from it and keeps `self.ledger` and `self.sessions`."""

    sites_own = None  # the driver's own files once `start_sites` came

    def sites_offer(self) -> dict:
        """The `sites` capability the `hello` reply offers."""
        return {"source": "tracemalloc"}

    def start_sites(self, frames: int) -> dict:
        if type(frames) is not int or not 1 <= frames <= MAX_FRAMES:
            raise DriverError("protocol", f"`start_sites`: frames must be 1 to {MAX_FRAMES}, got {frames!r}")
        tracemalloc.start(frames)
        files = {__file__}
        module = sys.modules.get(type(self).__module__)
        if getattr(module, "__file__", None):
            files.add(module.__file__)
        # tracemalloc names files as their code objects do: as the interpreter was given them
        # (relative or not), or as imported.
        absolute = {os.path.abspath(f) for f in files}
        self.sites_own = files | absolute | {os.path.relpath(f) for f in absolute}
        return {"reply": "done"}

    def snapshot(self) -> dict:
        metrics = {}
        heap = native_heap_bytes()
        if heap is not None:
            metrics["native_heap"] = heap
        body = {"reply": "snapshot", "snapshot": {"ledger": self.ledger.snapshot(), "metrics": metrics}}
        if self.sites_own is not None:
            body["sites"] = allocation_sites(self.sites_own)
        return body

    def idle(self, duration_ms: int) -> dict:
        time.sleep(duration_ms / 1000)
        return {"reply": "done"}

    def _session(self, session: int, call: str) -> dict:
        entry = self.sessions.get(session)
        if entry is None:
            raise DriverError(call, f"no open session {session}")
        return entry


class Driver(CommonCalls):
    """One engine over `litert_lm`, answering the protocol's calls."""

    def __init__(self, engine: dict, options: Options, litert_lm):
        self.lm = litert_lm
        self.options = options
        self.model = engine.get("model")
        self.device = engine.get("device") or "cpu"
        self.max_tokens = engine.get("max_tokens")
        self.ledger = Ledger()
        from litert_lm import _ffi  # the package's own loader: one library per process

        self.lib = _ffi._get_lib()
        count_handles(self.lib, self.ledger)
        self.engine = None
        self.workdir = None
        self.sessions: dict[int, dict] = {}
        self.next_session = 1
        # `keep_chunks`: every streamed chunk of every reply, never cleared.
        self.kept_chunks = []

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
            "at_unload": self.options.at_unload,
            "keep_chunks": str(self.options.keep_chunks).lower(),
        }
        if self.max_tokens is not None:
            details["max_tokens"] = str(self.max_tokens)
        return {"backend": BACKEND, "version": package, "details": details}

    # --- calls ----------------------------------------------------------------------------

    def load(self) -> dict:
        if self.engine is not None:
            raise DriverError("load", "the engine is already loaded")
        if not self.model:
            raise DriverError("unavailable", "no model: the scenario's engine.model is not set")
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
        conversation = entry["conversation"]
        text = entry["prompt"] or ""
        entry["prompt"] = None
        limit = request.get("max_output_tokens")
        cancel_after = request.get("cancel_after_tokens")
        try:
            if cancel_after is None and self.options.keep_chunks:
                before = len(self.kept_chunks)
                # The anti-pattern: the reply streamed into a list as long-lived as the driver.
                self.kept_chunks.extend(conversation.send_message_async(text, max_output_tokens=limit))
                tokens = len(self.kept_chunks) - before
                return {"reply": "generated", "outcome": {"tokens": tokens, "cancelled": False}}
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
        # Conversations the runner left open (a `skip_close` fault) outlive their engine: the
        # binding has just deleted it under them. What the application does with them next:
        if self.options.at_unload != "keep":
            orphans = [entry.pop("conversation") for entry in self.sessions.values()]
            self.sessions.clear()
            if self.options.at_unload == "close":
                for conversation in orphans:
                    conversation.close()
            del orphans
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None
        return {"reply": "done"}

    # --- helpers --------------------------------------------------------------------------

    def _track(self, obj, kind: str) -> None:
        if not self.options.count_wrappers:
            return
        self.ledger.created(kind)
        weakref.finalize(obj, self.ledger.deleted, kind)


def failed(kind: str, message: str) -> dict:
    return {"reply": "failed", "error": {"kind": kind, "message": message}}


def dispatch(driver: Driver, request: dict) -> dict:
    call = request.get("call")
    if call == "hello":
        raise DriverError("protocol", "`hello` may only be the first request")
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
        return driver.idle(request["duration_ms"])
    if call == "start_sites" and hasattr(driver, "start_sites"):
        return driver.start_sites(request["frames"])
    raise DriverError("protocol", f"unknown call `{call}`")


def answer(out, body: dict) -> None:
    out.write(json.dumps(body, separators=(",", ":")) + "\n")
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


FATAL = ("unavailable", "protocol")


def check_hello(first: dict) -> dict:
    """Checks that `first` is a `hello` of this protocol version and returns its `engine` object;
    raises `DriverError` (fatal) if it is not. Every driver here starts with it."""
    if first.get("call") != "hello":
        raise DriverError("protocol", f"the first request must be `hello`, got `{first.get('call')}`")
    if first.get("version") != PROTOCOL_VERSION:
        raise DriverError("protocol", "protocol version mismatch: the runner speaks "
                          f"{first.get('version')}, this driver speaks {PROTOCOL_VERSION}")
    engine = first.get("engine")
    if not isinstance(engine, dict):
        raise DriverError("protocol", "the hello request has no `engine` object")
    return engine


def handshake(first: dict) -> Driver:
    """Checks the `hello` request and builds the driver; raises `DriverError` (fatal) if it cannot."""
    engine = check_hello(first)
    options = Options.parse(engine.get("options"))
    if options.gc == "off":
        gc.disable()
    try:
        import litert_lm
    except ImportError as e:
        raise DriverError("unavailable", f"cannot import litert_lm ({e}); "
                          "install it: python3 -m pip install litert-lm-api==0.18.1") from e
    try:
        return Driver(engine, options, litert_lm)
    except Exception as e:  # noqa: BLE001 - whatever loading the library raises
        raise DriverError("unavailable", f"cannot load the LiteRT-LM library: {e}") from e


def serve(stdin, out, build=None, release_at_end: bool = False) -> int:
    """Answers requests until stdin ends (exit status 0) or a fatal failure was sent (1).

    `build(first_request)` checks the `hello` and builds the driver (this module's `handshake`
    by default); the other drivers in this folder serve through here with their own. With
    `release_at_end`, what the driver still holds is released (and collected) before the
    interpreter tears the runtime down."""
    build = build or handshake
    driver = None
    while True:
        request = None
        try:
            request = read_request(stdin)
            if request is None:
                break
            if driver is None:
                driver = build(request)
                body = {"reply": "hello", "version": PROTOCOL_VERSION, "pid": os.getpid(),
                        "backend": driver.describe()}
                if hasattr(driver, "sites_offer"):
                    body["sites"] = driver.sites_offer()
            else:
                body = dispatch(driver, request)
        except DriverError as e:
            body = failed(e.kind, str(e))
        except (KeyError, TypeError, ValueError) as e:
            call = request.get("call") if isinstance(request, dict) else None
            body = failed("protocol", f"bad `{call}` request: {e!r}")
        answer(out, body)
        if body["reply"] == "failed" and (driver is None or body["error"]["kind"] in FATAL):
            return 1
    if release_at_end:
        del driver
        gc.collect()
    return 0


def run_main(argv, doc: str, build=None, release_at_end: bool = False) -> int:
    """A driver's `main`: refuses arguments, moves the protocol off stdout and serves."""
    if argv:
        print(doc, file=sys.stderr)
        print("This driver takes no arguments: leakloop starts it and talks to it on stdin/stdout.",
              file=sys.stderr)
        return 2
    out = protocol_stdout()
    return serve(sys.stdin, out, build, release_at_end)


def main(argv) -> int:
    return run_main(argv, __doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
