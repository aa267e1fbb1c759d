#!/usr/bin/env python3
"""A leakloop engine driver over the LiteRT (TFLite) `Interpreter` of `ai-edge-litert`.

The driver speaks leakloop's worker protocol (docs/protocol.md, version 2) and runs a `.tflite`
model the way applications do: build an `Interpreter` from the model's bytes, resize the input,
`allocate_tensors()`, `set_tensor`, `invoke()`, read the output with `get_tensor()`. Mapped on
the protocol's calls:

  load            reads the model file into memory (the application's model buffer)
  open_session    lifecycle `per_request`: builds the request's own interpreter
  send            the prompt becomes the input: one row of 256 floats per prompt token (at most
                  64 rows), so prompts of mixed lengths are a shape mix (`resize_tensor_input`
                  and `allocate_tensors` whenever the row count changes)
  generate        one `invoke()` per output token, each output fed back as the next input and
                  read with `get_tensor()`; `cancel_after_tokens` stops submitting invokes after
                  that many (the Python Interpreter of ai-edge-litert 2.3.0 offers no way to
                  interrupt an `invoke()` in flight: stopping between invokes is the only cancel)
  close_session   lifecycle `per_request`: releases the request's interpreter
  unload          releases the shared interpreter and the model buffer (`load` again: a reload)

The Python `Interpreter` has no `close()`: its native interpreter is destroyed when the last
reference to the binding's wrapper goes, and a NumPy view from `Interpreter.tensor()` is such a
reference. The ledger therefore counts at that level, with weak-reference finalizers, so a kind
is `deleted` only when the runtime really destroyed it, not when the driver let go:

  interpreter     the binding's native interpreter wrapper (`Interpreter._interpreter`)
  output          each NumPy array read from an output: a copy from `get_tensor()`, or with
                  `read: view` a view from `tensor()`

Options (the scenario's `engine.options`) reproduce the lifecycles users write, and the
anti-patterns of on-device inference code (an interpreter rebuilt per inference and never
closed, outputs kept, a cancel that never reclaims):

  lifecycle: reuse        one interpreter, built at `load`, serves every request (the default)
  lifecycle: per_request  every session builds its own interpreter and releases it at close
  release: drop           an interpreter the application is done with loses its last reference
                          (the default; for Python this is the runtime's release)
  release: keep           ...is kept referenced instead (the application's list of them): never
                          released, the Python form of never calling `close()`
  keep_outputs: true      every output array read stays referenced (a history of results)
  read: copy              outputs are read with `get_tensor()`, a copy (the default)
  read: view              ...with `tensor()`, a zero-copy view into the interpreter's arena: a
                          view kept (`keep_outputs`) keeps its whole native interpreter alive,
                          and the runtime refuses to invoke that interpreter again
  cancel: stop            a cancelled request just stops invoking; its resources are released as
                          usual (the default)
  cancel: abandon         a cancelled request's interpreter is left to the worker that ran it
                          and never released, and the next request gets a fresh one (the
                          `future.cancel(true)` pattern)
  num_threads: N          the interpreter's thread count (integer >= 1; default 1)

Whatever the runtime prints goes to stderr: file descriptor 1 is moved aside for the protocol
before the runtime loads. The protocol plumbing (ledger, replies, the request reader) is the
LiteRT-LM Python driver's (`drivers/litert_lm_python.py`), imported from there.
"""

from __future__ import annotations

from dataclasses import dataclass
import json
import os
import sys
import weakref

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from litert_lm_python import (  # noqa: E402 - the path above makes it importable
    check_hello,
    CommonCalls,
    DriverError,
    Ledger,
    run_main,
)

BACKEND = "litert-interpreter"
PACKAGE = "ai-edge-litert"
PINNED = "2.3.0"
INSTALL = f"python3 -m pip install {PACKAGE}=={PINNED}"
# Rows of the input per prompt: one per token, capped so that a long prompt stays cheap.
MAX_ROWS = 64


@dataclass(frozen=True)
class Options:
    """The driver's options, from the `options` of the `hello` request's engine."""

    lifecycle: str = "reuse"
    release: str = "drop"
    keep_outputs: bool = False
    cancel: str = "stop"
    read: str = "copy"
    num_threads: int = 1

    CHOICES = {
        "lifecycle": ("reuse", "per_request"),
        "release": ("drop", "keep"),
        "keep_outputs": (True, False),
        "cancel": ("stop", "abandon"),
        "read": ("copy", "view"),
    }

    @classmethod
    def parse(cls, given) -> "Options":
        """Options from `engine.options`; an unknown name or value is refused (`unavailable`)."""
        if given is None:
            return cls()
        if not isinstance(given, dict):
            raise DriverError("unavailable", f"engine.options must be a mapping, got {given!r}")
        for name, value in given.items():
            if name == "num_threads":
                if type(value) is not int or value < 1:
                    raise DriverError(
                        "unavailable", "option `num_threads` must be an integer of at least 1"
                    )
                continue
            choices = cls.CHOICES.get(name)
            if choices is None:
                known = ", ".join([*cls.CHOICES, "num_threads"])
                raise DriverError("unavailable", f"unknown option `{name}` (this driver knows {known})")
            if value not in choices or type(value) is not type(choices[0]):
                allowed = " or ".join(json.dumps(c) for c in choices)
                raise DriverError("unavailable", f"option `{name}`: {json.dumps(value)} is not {allowed}")
        return cls(**given)


class Driver(CommonCalls):
    """One model over the LiteRT Interpreter, answering the protocol's calls."""

    def __init__(self, engine: dict, options: Options, interpreter_module, np):
        self.rt = interpreter_module
        self.np = np
        self.options = options
        self.model = engine.get("model")
        self.device = engine.get("device") or "cpu"
        self.ledger = Ledger()
        self.model_bytes: bytes | None = None
        self.shared = None  # lifecycle `reuse`: the one interpreter
        self.sessions: dict[int, dict] = {}
        self.next_session = 1
        # What the anti-pattern options keep alive; never cleared while the driver runs.
        self.kept_interpreters: list = []
        self.kept_outputs: list = []
        self.abandoned: list = []

    # --- identity -------------------------------------------------------------------------

    def describe(self) -> dict:
        try:
            from importlib.metadata import version

            package = version(PACKAGE)
        except Exception:  # noqa: BLE001 - any failure just leaves the version unknown
            package = "unknown"
        details = {
            "package": PACKAGE,
            "python": sys.version.split()[0],
            "numpy": self.np.__version__,
            "device": str(self.device),
            "model": str(self.model),
            "lifecycle": self.options.lifecycle,
            "release": self.options.release,
            "keep_outputs": json.dumps(self.options.keep_outputs),
            "cancel": self.options.cancel,
            "read": self.options.read,
            "num_threads": str(self.options.num_threads),
        }
        return {"backend": BACKEND, "version": package, "details": details}

    # --- calls ----------------------------------------------------------------------------

    def load(self) -> dict:
        if self.model_bytes is not None:
            raise DriverError("load", "the model is already loaded")
        if self.device != "cpu":
            raise DriverError("unavailable", f"device {self.device}: this driver runs on the CPU only")
        if not self.model:
            raise DriverError("unavailable", "no model: the scenario's engine.model is not set")
        try:
            with open(self.model, "rb") as f:
                self.model_bytes = f.read()
        except OSError as e:
            raise DriverError("unavailable", f"cannot read the model {self.model}: {e}") from e
        if self.options.lifecycle == "reuse":
            self.shared = self._build()
        return {"reply": "loaded", "backend": self.describe()}

    def open_session(self, turn: int, _options: dict) -> dict:
        if self.model_bytes is None:
            raise DriverError("open", "no model is loaded")
        interpreter = self._build() if self.options.lifecycle == "per_request" else None
        session = self.next_session
        self.next_session += 1
        self.sessions[session] = {"interpreter": interpreter, "turn": turn, "input": None}
        return {"reply": "opened", "session": session}

    def send(self, session: int, prompt: dict) -> dict:
        entry = self._session(session, "send")
        text = prompt.get("text") or ""
        rows = max(1, min(int(prompt.get("tokens") or 1), MAX_ROWS))
        # The prompt's bytes, repeated to fill the input: deterministic, and different per prompt.
        seed = self.np.frombuffer(text.encode("utf-8") or b"\0", dtype=self.np.uint8)
        features = self._features()
        values = self.np.resize(seed, rows * features).astype(self.np.float32) / 255.0
        entry["input"] = values.reshape(rows, features)
        return {"reply": "done"}

    def generate(self, session: int, request: dict) -> dict:
        entry = self._session(session, "generate")
        interpreter = self._interpreter(entry)
        if interpreter is None:
            raise DriverError("generate", f"session {session} has no interpreter (its request was abandoned)")
        data = entry["input"]
        if data is None:
            data = self.np.zeros((1, self._features()), dtype=self.np.float32)
        limit = int(request.get("max_output_tokens") or 0)
        cancel_after = request.get("cancel_after_tokens")
        steps = limit if cancel_after is None else min(limit, int(cancel_after))
        cancelled = cancel_after is not None and int(cancel_after) < limit
        try:
            source = interpreter.get_input_details()[0]
            sink = interpreter.get_output_details()[0]
            if tuple(source["shape"]) != data.shape:
                interpreter.resize_tensor_input(source["index"], list(data.shape))
                interpreter.allocate_tensors()
            for _ in range(steps):
                interpreter.set_tensor(source["index"], data)
                interpreter.invoke()
                data = self._read(interpreter, sink["index"])
        except (RuntimeError, ValueError) as e:
            # The binding's messages span indented lines: one line for the report.
            raise DriverError("generate", f"invoke: {' '.join(str(e).split())}") from e
        entry["input"] = None
        del data
        if cancelled and self.options.cancel == "abandon":
            self._abandon(entry, interpreter)
        return {"reply": "generated", "outcome": {"tokens": steps, "cancelled": cancelled}}

    def close_session(self, session: int) -> dict:
        entry = self.sessions.pop(session, None)
        if entry is None:
            raise DriverError("close", f"no open session {session}")
        interpreter = entry.pop("interpreter")
        if interpreter is not None:
            self._release(interpreter)
        del interpreter
        return {"reply": "done"}

    def unload(self) -> dict:
        if self.model_bytes is None:
            raise DriverError("unload", "no model is loaded")
        if self.shared is not None:
            shared, self.shared = self.shared, None
            self._release(shared)
            del shared
        # Per-request interpreters of sessions still open stay with their sessions.
        self.model_bytes = None
        return {"reply": "done"}

    # --- helpers --------------------------------------------------------------------------

    def _build(self):
        """A new interpreter over the model buffer, counted until its native wrapper is freed."""
        try:
            interpreter = self.rt.Interpreter(
                model_content=self.model_bytes, num_threads=self.options.num_threads
            )
            interpreter.allocate_tensors()
        except (RuntimeError, ValueError) as e:
            raise DriverError("load", f"Interpreter: {e}") from e
        self.ledger.created("interpreter")
        # The wrapper, not the Python object: NumPy views keep the wrapper (and the native
        # interpreter) alive after the `Interpreter` object is gone.
        weakref.finalize(interpreter._interpreter, self.ledger.deleted, "interpreter")
        return interpreter

    def _read(self, interpreter, index: int):
        """The output as the application reads it, counted until NumPy frees it; returns the
        next step's input."""
        if self.options.read == "view":
            output = interpreter.tensor(index)()
        else:
            output = interpreter.get_tensor(index)
        self.ledger.created("output")
        weakref.finalize(output, self.ledger.deleted, "output")
        if self.options.keep_outputs:
            self.kept_outputs.append(output)
        # A view must be gone before the next invoke (the runtime checks): its values are copied.
        return output.copy() if self.options.read == "view" else output

    def _release(self, interpreter) -> None:
        """The application is done with `interpreter`: drop it, or keep it (`release: keep`)."""
        if self.options.release == "keep":
            self.kept_interpreters.append(interpreter)

    def _abandon(self, entry: dict, interpreter) -> None:
        """`cancel: abandon`: the cancelled request's interpreter stays with its orphaned worker."""
        self.abandoned.append(interpreter)
        if self.options.lifecycle == "per_request":
            entry["interpreter"] = None
        else:
            # The shared interpreter may still be busy for all the application knows: it builds
            # a fresh one for the next request.
            self.shared = self._build()

    def _interpreter(self, entry: dict):
        if self.options.lifecycle == "per_request":
            return entry["interpreter"]
        if self.shared is None:
            raise DriverError("generate", "no model is loaded")
        return self.shared

    def _features(self) -> int:
        interpreter = self.shared or next(
            (e["interpreter"] for e in self.sessions.values() if e["interpreter"] is not None), None
        )
        if interpreter is None:
            return 256
        return int(interpreter.get_input_details()[0]["shape"][-1])


def handshake(first: dict) -> Driver:
    """Checks the `hello` request and builds the driver; raises `DriverError` (fatal) if it cannot."""
    engine = check_hello(first)
    options = Options.parse(engine.get("options"))
    try:
        import numpy as np
        from ai_edge_litert import interpreter
    except ImportError as e:
        raise DriverError("unavailable", f"cannot import ai_edge_litert ({e}); install it: {INSTALL}") from e
    return Driver(engine, options, interpreter, np)


def main(argv) -> int:
    return run_main(argv, __doc__, handshake)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
