#!/usr/bin/env python3
"""A leakloop engine driver over ONNX Runtime's Python package (`onnxruntime`).

It runs a small ONNX model (fixtures/onnxruntime/models/tiny-lm.onnx: token ids in, logits out,
dynamic batch and sequence length) as a toy language model: `generate` appends the most likely
token and runs the model again on the longer sequence, once per output token, so every step is a
new input shape the runtime plans memory for. It speaks leakloop's worker protocol
(docs/protocol.md, version 2); the plumbing (ledger, line reading, the protocol's file descriptor)
is the Python-binding driver's, imported from drivers/litert_lm_python.py.

With `api: genai` it drives onnxruntime-genai instead (fixtures/onnxruntime/models/tiny-lm-genai/,
a decoder with a key/value cache): a `Model` per load and a `Generator` per session, which holds
that conversation's cache.

Ledger (cumulative, counted when the native object is really destroyed: a weakref finaliser on
the binding's own pybind11 object, not on the Python wrapper):
  session     an `InferenceSession` (the C++ session: the model's weights, its planned memory)
  output      an output of `run`: a numpy array, or a native `OrtValue`
  io_binding  an `IOBinding` (with `output: iobinding`)
  model, generator  onnxruntime-genai's `Model` and `Generator` (with `api: genai`)

Options (the scenario's `engine.options`, sent in `hello`):
  api: session          ONNX Runtime's InferenceSession (the default)
  api: genai            onnxruntime-genai; then only `release` applies (to generators)
  session: reuse        one InferenceSession built at `load`, released at `unload` (the default)
  session: per_request  an InferenceSession built at every `open_session`, released at its close
  release: drop         a released session loses its last reference (the default)
  release: keep         ...is kept in a list instead: a session rebuilt per request and never
                        released, the background documents' anti-pattern
  output: numpy         `InferenceSession.run`, outputs as numpy arrays (the default)
  output: ortvalue      `run_with_ort_values`, outputs as native OrtValues
  output: iobinding     an IOBinding per run, the input bound from numpy, the output allocated by
                        the runtime on the CPU and read through `get_outputs()`
  keep_outputs: true    every run's output is kept forever (the anti-pattern: outputs kept)
  cpu_mem_arena: bool   SessionOptions.enable_cpu_mem_arena (default true: the runtime's arena)
  mem_pattern: bool     SessionOptions.enable_mem_pattern (default true: planned per shape)
  arena_extend_strategy: next_power_of_two | same_as_requested
                        a process-wide CPU arena with this growth rule, registered once and used
                        by every session (`session.use_env_allocators`); default: none, each
                        session has its own arena
  batch: N or [N, ...]  batch sizes, one per `generate` in turn (default 1): a shape mix
  threads: N            intra-op threads (default 1: figures that do not depend on the machine)

Whatever the runtime prints goes to stderr: file descriptor 1 is moved aside for the protocol.
"""

from __future__ import annotations

import json
import os
import sys
import weakref

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from litert_lm_python import (  # noqa: E402 - the sibling module, found through the path above
    check_hello,
    CommonCalls,
    DriverError,
    Ledger,
    run_main,
)

BACKEND = "onnxruntime"
INSTALL = "python3 -m pip install onnxruntime==1.32.0"
INSTALL_GENAI = "python3 -m pip install onnxruntime-genai==0.18.0"

# Each option's allowed values (a tuple) or type (a type), and its default.
OPTIONS = {
    "api": (("session", "genai"), "session"),
    "session": (("reuse", "per_request"), "reuse"),
    "release": (("drop", "keep"), "drop"),
    "output": (("numpy", "ortvalue", "iobinding"), "numpy"),
    "keep_outputs": (bool, False),
    "cpu_mem_arena": (bool, True),
    "mem_pattern": (bool, True),
    "arena_extend_strategy": (("next_power_of_two", "same_as_requested"), None),
    "batch": ("batches", [1]),
    "threads": (int, 1),
}
STRATEGIES = {"next_power_of_two": 0, "same_as_requested": 1}


def parse_options(given) -> dict:
    """The driver's options from `engine.options`; an unknown name or value is refused."""
    options = {name: default for name, (_, default) in OPTIONS.items()}
    if given is None:
        return options
    if not isinstance(given, dict):
        raise DriverError("unavailable", f"engine.options must be a mapping, got {given!r}")
    for name, value in given.items():
        if name not in OPTIONS:
            known = ", ".join(OPTIONS)
            raise DriverError("unavailable", f"unknown option `{name}` (this driver knows {known})")
        allowed = OPTIONS[name][0]
        if allowed == "batches":
            value = [value] if isinstance(value, int) and not isinstance(value, bool) else value
            if not (isinstance(value, list) and value and all(
                    isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 64 for v in value)):
                raise DriverError("unavailable", f"option `{name}` must be an integer 1..64 "
                                  f"or a list of them, got {json.dumps(given[name])}")
        elif isinstance(allowed, tuple):
            if value not in allowed:
                choices = " or ".join(json.dumps(c) for c in allowed)
                raise DriverError("unavailable",
                                  f"option `{name}`: {json.dumps(value)} is not {choices}")
        elif type(value) is not allowed or (allowed is int and not 1 <= value <= 64):
            wanted = "a boolean" if allowed is bool else "an integer 1..64"
            raise DriverError("unavailable",
                              f"option `{name}` must be {wanted}, got {json.dumps(value)}")
        options[name] = value
    if options["api"] == "genai":
        other = [name for name in given if name not in ("api", "release")]
        if other:
            raise DriverError("unavailable", f"option `{other[0]}` does not apply with `api: genai` "
                              "(only `release` does)")
    return options


class Driver(CommonCalls):
    """One model over `onnxruntime`, answering the protocol's calls."""

    def __init__(self, engine: dict, options: dict, ort, np):
        self.ort = ort
        self.np = np
        self.options = options
        self.model = engine.get("model")
        self.max_tokens = int(engine.get("max_tokens") or 1024)
        self.ledger = Ledger()
        self.loaded = False
        self.shared = None  # the session of `session: reuse`
        self.sessions: dict[int, dict] = {}
        self.next_session = 1
        self.generations = 0
        # What the anti-pattern options keep; never released while the driver runs.
        self.kept_sessions = []
        self.kept_outputs = []
        if options["arena_extend_strategy"] is not None:
            self._register_env_arena(options["arena_extend_strategy"])

    # --- identity -------------------------------------------------------------------------

    def describe(self) -> dict:
        details = {
            "python": sys.version.split()[0],
            "providers": ",".join(self.ort.get_available_providers()),
            "model": str(self.model),
        }
        for name in OPTIONS:
            value = self.options[name]
            details[name] = "default" if value is None else json.dumps(value).strip('"')
        return {"backend": BACKEND, "version": self.ort.__version__, "details": details}

    # --- the runtime ----------------------------------------------------------------------

    def _register_env_arena(self, strategy: str) -> None:
        """A process-wide CPU arena growing by `strategy`, shared by every session."""
        ort = self.ort
        try:
            info = ort.OrtMemoryInfo("Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0,
                                     ort.OrtMemType.DEFAULT)
            # max_mem 0 (no limit), the strategy, the runtime's default initial chunk and
            # dead bytes per chunk (-1).
            config = ort.OrtArenaCfg(0, STRATEGIES[strategy], -1, -1)
            ort.create_and_register_allocator(info, config)
        except Exception as e:  # noqa: BLE001 - the binding raises its own Fail and others
            raise DriverError("unavailable", f"cannot register a CPU arena ({strategy}): {e}") from e

    def _build_session(self, call: str):
        ort = self.ort
        so = ort.SessionOptions()
        so.enable_cpu_mem_arena = self.options["cpu_mem_arena"]
        so.enable_mem_pattern = self.options["mem_pattern"]
        so.intra_op_num_threads = self.options["threads"]
        so.inter_op_num_threads = 1
        so.log_severity_level = 3
        if self.options["arena_extend_strategy"] is not None:
            so.add_session_config_entry("session.use_env_allocators", "1")
        try:
            session = ort.InferenceSession(self.model, sess_options=so,
                                           providers=["CPUExecutionProvider"])
        except Exception as e:  # noqa: BLE001
            raise DriverError(call, f"InferenceSession({self.model}): {e}") from e
        self._track(session._sess, "session")
        return session

    def _track(self, native, kind: str) -> None:
        """Counts `native` now and again when Python really frees it."""
        self.ledger.created(kind)
        weakref.finalize(native, self.ledger.deleted, kind)

    def _run(self, session, ids):
        """One run on `ids`; returns the logits of the last position of the first row."""
        np = self.np
        mode = self.options["output"]
        if mode == "numpy":
            output = session.run(["logits"], {"ids": ids})[0]
            self._track(output, "output")
            logits = output[0, -1]
        elif mode == "ortvalue":
            feed = {"ids": self.ort.OrtValue.ortvalue_from_numpy(ids)}
            value = session.run_with_ort_values(["logits"], feed)[0]
            native = value._ortvalue if hasattr(value, "_ortvalue") else value
            self._track(native, "output")
            output = value
            logits = value.numpy()[0, -1]
        else:
            binding = session.io_binding()
            self._track(binding._iobinding, "io_binding")
            binding.bind_cpu_input("ids", ids)
            binding.bind_output("logits", "cpu")
            session.run_with_iobinding(binding)
            output = binding.get_outputs()[0]
            self._track(output._ortvalue, "output")
            logits = output.numpy()[0, -1]
            del binding
        token = int(np.argmax(logits))
        if self.options["keep_outputs"]:
            self.kept_outputs.append(output)
        return token

    # --- calls ----------------------------------------------------------------------------

    def load(self) -> dict:
        if self.loaded:
            raise DriverError("load", "the model is already loaded")
        if not self.model:
            raise DriverError("unavailable", "no model: the scenario's engine.model is not set")
        if not os.path.isfile(self.model):
            raise DriverError("unavailable", f"model file not found: {self.model}")
        if self.options["session"] == "reuse":
            self.shared = self._build_session("load")
        self.loaded = True
        return {"reply": "loaded", "backend": self.describe()}

    def open_session(self, turn: int, _options: dict | None = None) -> dict:
        if not self.loaded:
            raise DriverError("open", "no model is loaded")
        entry = {"turn": turn, "ids": None, "session": None}
        if self.options["session"] == "per_request":
            entry["session"] = self._build_session("open")
        session = self.next_session
        self.next_session += 1
        self.sessions[session] = entry
        return {"reply": "opened", "session": session}

    def send(self, session: int, prompt: dict) -> dict:
        entry = self._session(session, "send")
        text = prompt.get("text") or ""
        length = max(1, int(prompt.get("tokens") or 0), len(text.split()))
        data = text.encode("utf-8") or b"\x00"
        # Token ids from the prompt's bytes, as many as its length in tokens.
        entry["ids"] = [data[i % len(data)] for i in range(length)]
        return {"reply": "done"}

    def generate(self, session: int, request: dict) -> dict:
        entry = self._session(session, "generate")
        model = entry["session"] or self.shared
        if model is None:
            raise DriverError("generate", "no model is loaded")
        tokens = list(entry["ids"] or [0])
        entry["ids"] = None
        limit = int(request.get("max_output_tokens") or 0)
        cancel_after = request.get("cancel_after_tokens")
        batches = self.options["batch"]
        batch = batches[self.generations % len(batches)]
        self.generations += 1
        produced = 0
        cancelled = False
        try:
            while produced < limit:
                if cancel_after is not None and produced >= cancel_after:
                    cancelled = True
                    break
                window = tokens[-self.max_tokens:]
                ids = self.np.array([window] * batch, dtype=self.np.int64)
                tokens.append(self._run(model, ids))
                produced += 1
        except DriverError:
            raise
        except Exception as e:  # noqa: BLE001
            raise DriverError("generate", f"run: {e}") from e
        return {"reply": "generated", "outcome": {"tokens": produced, "cancelled": cancelled}}

    def close_session(self, session: int) -> dict:
        entry = self.sessions.pop(session, None)
        if entry is None:
            raise DriverError("close", f"no open session {session}")
        self._release(entry.pop("session"))
        return {"reply": "done"}

    def unload(self) -> dict:
        if not self.loaded:
            raise DriverError("unload", "no model is loaded")
        self.loaded = False
        shared, self.shared = self.shared, None
        self._release(shared)
        return {"reply": "done"}

    def _release(self, session) -> None:
        """Drops the driver's reference to `session`, or keeps it (`release: keep`)."""
        if session is not None and self.options["release"] == "keep":
            self.kept_sessions.append(session)
        # With `drop` the last reference goes here: Python's reference count frees the C++
        # session now, and its finaliser counts the deletion.
        del session


class GenaiDriver(Driver):
    """The same calls over onnxruntime-genai: a `Model` per load, a `Generator` per session."""

    def __init__(self, engine: dict, options: dict, ort, np, og):
        super().__init__(engine, options, ort, np)
        self.og = og
        self.genai_model = None

    def describe(self) -> dict:
        details = {
            "python": sys.version.split()[0],
            "onnxruntime": self.ort.__version__,
            "model": str(self.model),
            "api": "genai",
            "release": self.options["release"],
        }
        return {"backend": BACKEND, "version": f"genai {self.og.__version__}", "details": details}

    def load(self) -> dict:
        if self.genai_model is not None:
            raise DriverError("load", "the model is already loaded")
        folder = self.model
        if folder and os.path.isfile(folder):
            folder = os.path.dirname(folder)
        if not folder or not os.path.isfile(os.path.join(folder, "genai_config.json")):
            raise DriverError("unavailable", f"no genai_config.json in the model folder {self.model}")
        with open(os.path.join(folder, "genai_config.json"), encoding="utf-8") as f:
            context = json.load(f).get("model", {}).get("context_length") or self.max_tokens
        # A generator may not ask for more than the model's context.
        self.max_length = min(self.max_tokens, int(context))
        try:
            self.genai_model = self.og.Model(folder)
        except Exception as e:  # noqa: BLE001
            raise DriverError("load", f"onnxruntime_genai.Model({folder}): {e}") from e
        self._track(self.genai_model, "model")
        self.loaded = True
        return {"reply": "loaded", "backend": self.describe()}

    def open_session(self, turn: int, _options: dict | None = None) -> dict:
        if self.genai_model is None:
            raise DriverError("open", "no model is loaded")
        try:
            params = self.og.GeneratorParams(self.genai_model)
            params.set_search_options(max_length=self.max_length)
            generator = self.og.Generator(self.genai_model, params)
        except Exception as e:  # noqa: BLE001
            raise DriverError("open", f"Generator: {e}") from e
        self._track(generator, "generator")
        session = self.next_session
        self.next_session += 1
        self.sessions[session] = {"turn": turn, "session": generator}
        return {"reply": "opened", "session": session}

    def send(self, session: int, prompt: dict) -> dict:
        entry = self._session(session, "send")
        super().send(session, prompt)
        # Token ids 0 to 2 are padding, start and end: the prompt keeps clear of them.
        ids = [3 + i % 250 for i in entry.pop("ids")]
        try:
            entry["session"].append_tokens([ids])
        except Exception as e:  # noqa: BLE001
            raise DriverError("send", f"append_tokens: {e}") from e
        return {"reply": "done"}

    def generate(self, session: int, request: dict) -> dict:
        generator = self._session(session, "generate")["session"]
        limit = int(request.get("max_output_tokens") or 0)
        cancel_after = request.get("cancel_after_tokens")
        produced = 0
        cancelled = False
        try:
            while produced < limit and not generator.is_done():
                if cancel_after is not None and produced >= cancel_after:
                    cancelled = True
                    break
                generator.generate_next_token()
                produced += 1
        except Exception as e:  # noqa: BLE001
            raise DriverError("generate", f"generate_next_token: {e}") from e
        return {"reply": "generated", "outcome": {"tokens": produced, "cancelled": cancelled}}

    def unload(self) -> dict:
        if self.genai_model is None:
            raise DriverError("unload", "no model is loaded")
        self.loaded = False
        model, self.genai_model = self.genai_model, None
        self._release(model)
        return {"reply": "done"}


def handshake(first: dict) -> Driver:
    """Checks the `hello` request and builds the driver; raises `DriverError` (fatal) if it cannot."""
    engine = check_hello(first)
    options = parse_options(engine.get("options"))
    try:
        import numpy as np
        import onnxruntime as ort
    except ImportError as e:
        raise DriverError("unavailable", f"cannot import onnxruntime ({e}); install it: {INSTALL}") from e
    if options["api"] == "genai":
        try:
            import onnxruntime_genai as og
        except ImportError as e:
            raise DriverError("unavailable", f"cannot import onnxruntime_genai ({e}); "
                              f"install it: {INSTALL_GENAI}") from e
        return GenaiDriver(engine, options, ort, np, og)
    return Driver(engine, options, ort, np)


def main(argv) -> int:
    # What the driver still holds is released before the interpreter tears the runtime down.
    return run_main(argv, __doc__, handshake, release_at_end=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
