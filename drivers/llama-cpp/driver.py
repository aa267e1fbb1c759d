#!/usr/bin/env python3
"""A leakloop engine driver over llama.cpp through its Python package (`llama_cpp`, from
`llama-cpp-python`), in process.

It loads a GGUF model (fixtures/models/tiny-llama.gguf, written by build_model.py beside this
file) with `llama_cpp.Llama` and answers leakloop's worker protocol (docs/protocol.md, version 2):
`send` keeps the prompt, `generate` runs `create_completion` on it (greedy, so runs repeat), or
streams it when the scenario cancels after K tokens. The plumbing (ledger, line reading, serve
loop, the protocol's file descriptor) is the Python-binding driver's, imported from
drivers/litert_lm_python.py.

Ledger (cumulative, counted at the ctypes boundary of `llama_cpp.llama_cpp`, so a native object
counts as deleted only when llama.cpp really frees it):
  model     a `llama_model` (the weights): `llama_model_load_from_file` / `llama_model_free`
  context   a `llama_context` (key/value cache, compute buffers): `llama_init_from_model` /
            `llama_free`
  batch     a `llama_batch`: `llama_batch_init` / `llama_batch_free`
  stream    a streamed completion (a Python generator over the context), counted when Python
            finalises it
  logits    a copy of a generation's logits (`Llama.scores`), as applications read them,
            counted when Python frees it

Options (the scenario's `engine.options`, sent in `hello`):
  context: reuse        one `Llama` built at `load`, used by every request (the default)
  context: per_request  a `Llama` built at every `open_session`, released at its close
  release: close        a released `Llama` is closed (`Llama.close()`, the default)
  release: drop         ...loses its last reference: freed by `__del__` when Python collects it
  release: keep         ...is kept in a list, never closed (the anti-pattern: contexts never
                        closed)
  cache: none | ram     `Llama.set_cache(LlamaRAMCache(cache_bytes))`: the prompt cache
                        (default none); shared by every `Llama` the driver builds
  cache_bytes: N        the cache's `capacity_bytes` (default 2 GiB, the package's own default:
                        in practice unbounded)
  distinct_prompts: true  each request's prompt starts with its own number, so every request is
                        a prompt the cache has not seen (default false: the scenario's prompts)
  keep_outputs: true    every completion and its logits copy are kept forever (the anti-pattern:
                        outputs kept)
  cancel: stop          a `cancel_after_tokens` generation closes its stream after K chunks (the
                        default: llama-cpp-python's generator ends and releases what it holds)
  cancel: abandon       ...stops reading after K chunks and keeps the stream object unclosed, as
                        an application that parks unfinished streams (a cancel that never
                        reclaims)
  threads: N            llama.cpp's threads (default 1: figures that do not depend on the machine)

Whatever llama.cpp prints goes to stderr: file descriptor 1 is moved aside for the protocol.
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

BACKEND = "llama-cpp"
INSTALL = ("CMAKE_ARGS=-DGGML_NATIVE=OFF python3 -m pip install "
           "'llama-cpp-python[server]==0.3.36'")

# Each option's allowed values (a tuple) or type (a type), and its default.
OPTIONS = {
    "context": (("reuse", "per_request"), "reuse"),
    "release": (("close", "drop", "keep"), "close"),
    "cache": (("none", "ram"), "none"),
    "cache_bytes": (int, 2 << 30),
    "distinct_prompts": (bool, False),
    "keep_outputs": (bool, False),
    "cancel": (("stop", "abandon"), "stop"),
    "threads": (int, 1),
}

# llama.cpp functions that create a native object, by ledger kind, and those that free one.
CREATORS = {
    "llama_model_load_from_file": "model",
    "llama_init_from_model": "context",
    "llama_batch_init": "batch",
}
DELETERS = {
    "llama_model_free": "model",
    "llama_free": "context",
    "llama_batch_free": "batch",
}


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
        if isinstance(allowed, tuple):
            if value not in allowed:
                choices = " or ".join(json.dumps(c) for c in allowed)
                raise DriverError("unavailable",
                                  f"option `{name}`: {json.dumps(value)} is not {choices}")
        elif allowed is bool:
            if type(value) is not bool:
                raise DriverError("unavailable",
                                  f"option `{name}` must be a boolean, got {json.dumps(value)}")
        elif type(value) is not int or value < 1 or (name == "threads" and value > 64):
            wanted = "an integer 1..64" if name == "threads" else "a positive integer"
            raise DriverError("unavailable",
                              f"option `{name}` must be {wanted}, got {json.dumps(value)}")
        options[name] = value
    return options


def count_native(lib, ledger: Ledger) -> None:
    """Wraps llama.cpp's create and free functions in the package's ctypes module, so that every
    native object is counted where it is made and where it is really freed. The package's
    internals call them as `llama_cpp.NAME(...)` at call time, so replacing the module attribute
    reaches every call."""

    def creator(fn, kind):
        def call(*args):
            made = fn(*args)
            # A batch is a struct returned by value; the others are pointers (NULL on failure).
            if kind == "batch" or made:
                ledger.created(kind)
            return made

        return call

    def deleter(fn, kind):
        def call(*args):
            if kind == "batch" or (args and args[0]):
                ledger.deleted(kind)
            return fn(*args)

        return call

    for name, kind in CREATORS.items():
        setattr(lib, name, creator(getattr(lib, name), kind))
    for name, kind in DELETERS.items():
        setattr(lib, name, deleter(getattr(lib, name), kind))


class Driver(CommonCalls):
    """One model over `llama_cpp`, answering the protocol's calls."""

    def __init__(self, engine: dict, options: dict, llama_cpp):
        self.llama_cpp = llama_cpp
        self.options = options
        self.model = engine.get("model")
        self.n_ctx = int(engine.get("max_tokens") or 512)
        self.ledger = Ledger()
        count_native(llama_cpp.llama_cpp, self.ledger)
        self.loaded = False
        self.shared = None  # the Llama of `context: reuse`
        self.cache = None
        self.sessions: dict[int, dict] = {}
        self.next_session = 1
        self.requests = 0
        self.bias = None  # the logit biases, built on the first generation
        # What the anti-pattern options keep; never released while the driver runs.
        self.kept_llamas = []
        self.kept_outputs = []
        self.kept_streams = []

    # --- identity -------------------------------------------------------------------------

    def describe(self) -> dict:
        details = {"python": sys.version.split()[0], "model": str(self.model),
                   "n_ctx": str(self.n_ctx)}
        for name in OPTIONS:
            details[name] = json.dumps(self.options[name]).strip('"')
        return {"backend": BACKEND, "version": self.llama_cpp.__version__, "details": details}

    # --- the runtime ----------------------------------------------------------------------

    def _build(self, call: str):
        try:
            llm = self.llama_cpp.Llama(
                model_path=self.model, n_ctx=self.n_ctx, n_batch=min(self.n_ctx, 512),
                n_threads=self.options["threads"], n_threads_batch=self.options["threads"],
                seed=26, verbose=False,
            )
        except Exception as e:  # noqa: BLE001 - the package raises ValueError and others
            raise DriverError(call, f"llama_cpp.Llama({self.model}): {e}") from e
        if self.cache is not None:
            llm.set_cache(self.cache)
        return llm

    def _release(self, llm) -> None:
        """Closes `llm`, drops it, or keeps it (`release`)."""
        if llm is None:
            return
        release = self.options["release"]
        if release == "close":
            try:
                llm.close()
            except Exception as e:  # noqa: BLE001
                raise DriverError("close", f"Llama.close: {e}") from e
        elif release == "keep":
            self.kept_llamas.append(llm)
        # With `drop` the last reference goes here: `Llama.__del__` frees the context and the
        # model when Python's reference count (or the cyclic collector) reaches it.
        del llm

    def _track(self, obj, kind: str) -> None:
        """Counts `obj` now and again when Python really frees it."""
        self.ledger.created(kind)
        weakref.finalize(obj, self.ledger.deleted, kind)

    # --- calls ----------------------------------------------------------------------------

    def load(self) -> dict:
        if self.loaded:
            raise DriverError("load", "the model is already loaded")
        if not self.model:
            raise DriverError("unavailable", "no model: the scenario's engine.model is not set")
        if not os.path.isfile(self.model):
            raise DriverError("unavailable", f"model file not found: {self.model}")
        if self.options["cache"] == "ram":
            self.cache = self.llama_cpp.LlamaRAMCache(capacity_bytes=self.options["cache_bytes"])
        if self.options["context"] == "reuse":
            self.shared = self._build("load")
        self.loaded = True
        return {"reply": "loaded", "backend": self.describe()}

    def open_session(self, turn: int, _options: dict | None = None) -> dict:
        if not self.loaded:
            raise DriverError("open", "no model is loaded")
        entry = {"turn": turn, "prompt": None, "llm": None}
        if self.options["context"] == "per_request":
            entry["llm"] = self._build("open")
        session = self.next_session
        self.next_session += 1
        self.sessions[session] = entry
        return {"reply": "opened", "session": session}

    def send(self, session: int, prompt: dict) -> dict:
        entry = self._session(session, "send")
        text = prompt.get("text") or ""
        words = int(prompt.get("tokens") or 0)
        if not text:
            # A prompt given by its length only: that many words.
            text = " ".join(("the", "engine", "cache", "session")[i % 4] for i in range(max(1, words)))
        self.requests += 1
        if self.options["distinct_prompts"]:
            text = f"request {self.requests}: {text}"
        entry["prompt"] = text
        return {"reply": "done"}

    def generate(self, session: int, request: dict) -> dict:
        entry = self._session(session, "generate")
        llm = entry["llm"] or self.shared
        if llm is None:
            raise DriverError("generate", "no model is loaded")
        text = entry["prompt"] or ""
        entry["prompt"] = None
        limit = int(request.get("max_output_tokens") or 0)
        cancel_after = request.get("cancel_after_tokens")
        # Greedy, with the end of text suppressed: every run generates exactly `limit` tokens.
        settings = dict(max_tokens=limit, temperature=0.0, top_k=1, logit_bias=self._bias(llm))
        try:
            if cancel_after is None:
                completion = llm.create_completion(text, **settings)
                tokens = int(completion["usage"]["completion_tokens"])
                self._keep(llm, completion)
                return {"reply": "generated", "outcome": {"tokens": tokens, "cancelled": False}}
            return self._stream(llm, text, settings, int(cancel_after))
        except DriverError:
            raise
        except Exception as e:  # noqa: BLE001
            raise DriverError("generate", f"create_completion: {e}") from e

    def _bias(self, llm) -> dict:
        """Logit biases that keep generations to `max_tokens` tokens: no end of text, and no token
        that ends in an unfinished UTF-8 sequence. llama-cpp-python 0.3.36 checks `max_tokens`
        only once the text decodes, so a random model's stray byte tokens run past it (9 tokens
        for 8 asked, seen here)."""
        if self.bias is None:
            self.bias = {llm.token_eos(): -1e9}
            for token in range(llm.n_vocab()):
                if any(b >= 0x80 for b in llm.detokenize([token])):
                    self.bias[token] = -1e9
        return self.bias

    def _keep(self, llm, completion) -> None:
        """Reads the generation's logits, as applications do, and keeps them with the completion
        when `keep_outputs` asks."""
        logits = llm.scores[: llm.n_tokens, :].copy()
        self._track(logits, "logits")
        if self.options["keep_outputs"]:
            self.kept_outputs.append((completion, logits))

    def _stream(self, llm, text: str, settings: dict, cancel_after: int) -> dict:
        stream = llm.create_completion(text, stream=True, **settings)
        self._track(stream, "stream")
        chunks = 0
        cancelled = False
        for _chunk in stream:
            chunks += 1
            if chunks >= cancel_after:
                cancelled = True
                break
        if self.options["cancel"] == "abandon":
            self.kept_streams.append(stream)
        else:
            # Closing the generator runs its cleanup now (the package's `finally`), instead of
            # whenever Python collects it.
            stream.close()
        del stream
        return {"reply": "generated", "outcome": {"tokens": chunks, "cancelled": cancelled}}

    def close_session(self, session: int) -> dict:
        entry = self.sessions.pop(session, None)
        if entry is None:
            raise DriverError("close", f"no open session {session}")
        self._release(entry.pop("llm"))
        return {"reply": "done"}

    def unload(self) -> dict:
        if not self.loaded:
            raise DriverError("unload", "no model is loaded")
        self.loaded = False
        shared, self.shared = self.shared, None
        self._release(shared)
        # The cache's entries are copies of states: they outlive no model, but a reload starts
        # with a new cache, as a reloaded application does.
        self.cache = None
        return {"reply": "done"}


def handshake(first: dict) -> Driver:
    """Checks the `hello` request and builds the driver; raises `DriverError` (fatal) if it cannot."""
    engine = check_hello(first)
    options = parse_options(engine.get("options"))
    try:
        import llama_cpp
    except ImportError as e:
        raise DriverError("unavailable", f"cannot import llama_cpp ({e}); install it: {INSTALL}") from e
    try:
        return Driver(engine, options, llama_cpp)
    except Exception as e:  # noqa: BLE001 - whatever loading the library raises
        raise DriverError("unavailable", f"cannot load llama.cpp: {e}") from e


def main(argv) -> int:
    # What the driver still holds is released before the interpreter tears the runtime down.
    return run_main(argv, __doc__, handshake, release_at_end=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
