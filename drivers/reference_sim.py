#!/usr/bin/env python3
"""A reference engine driver for leakloop's worker protocol, version 2 (docs/protocol.md).

It drives no model: it is a fake engine that allocates real memory on request, so that growth is
measurable from outside, and counts its conversations for the ledger. It shows everything a real
driver does: the handshake with a version check, one reply per request, stdout kept for the
protocol (whatever else prints goes to stderr), errors as `failed` replies, cumulative ledger
counts, and reading the OpenCL interposer's counts when leakloop preloads it.

Options (`engine.options` in a scenario):
  model_kib     memory held while the model is loaded (default 1024)
  session_kib   memory held by each open conversation, freed at close (default 256)
  leak_kib      memory kept forever at each close: a leak in the engine (default 0)
  skip_release  close answers `done` but never releases the conversation (default false)
  backend_name  the backend name it reports (default reference-sim); with ledger_kind and
                generate_error, how tests feed hostile text (markup, ESC, NUL) to every report
  ledger_kind   the ledger kind its conversations are counted as (default conversation)
  generate_error  when set, every generate fails with this message (default: none)
"""

import ctypes
import json
import os
import sys

PROTOCOL_VERSION = 2
OPTIONS = {
    "model_kib": 1024,
    "session_kib": 256,
    "leak_kib": 0,
    "skip_release": False,
    "backend_name": "reference-sim",
    "ledger_kind": "conversation",
    "generate_error": "",
}


def touched(kib):
    """KiB of memory that is really resident (every page written)."""
    return bytearray(b"\xa5") * (kib * 1024)


# The non-fatal kind of each call's own failure (docs/protocol.md, "Errors"): a fatal kind would end
# the whole session for what is only this call's problem.
CALL_KINDS = {
    "load": "load",
    "open_session": "open",
    "send": "send",
    "generate": "generate",
    "close_session": "close",
    "unload": "unload",
}


class Failure(Exception):
    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind
        self.message = message


def field(request, name):
    """A field the request must carry; without it the runner broke the protocol (fatal)."""
    if name not in request:
        raise Failure("protocol", f"`{request.get('call')}` lacks the field `{name}`")
    return request[name]


class Engine:
    def __init__(self, config):
        options = dict(OPTIONS)
        for key, value in (config.get("options") or {}).items():
            if key not in OPTIONS:
                raise Failure("unavailable", f"unknown option `{key}` (known: {', '.join(OPTIONS)})")
            if type(value) is not type(OPTIONS[key]) or (isinstance(value, int) and value < 0):
                raise Failure("unavailable", f"option `{key}` must be a {type(OPTIONS[key]).__name__} >= 0")
            options[key] = value
        self.options = options
        self.model = None
        self.sessions = {}
        self.next_session = 1
        self.leaked = []
        self.created = 0
        self.deleted = 0
        self.interposer = find_interposer()

    def backend(self):
        details = {
            "language": "python",
            "opencl_interposer": "loaded" if self.interposer else "absent",
        }
        return {"backend": self.options["backend_name"], "version": "1.0", "details": details}

    def load(self):
        self.model = touched(self.options["model_kib"])
        return {"reply": "loaded", "backend": self.backend()}

    def open_session(self, turn):
        session = self.next_session
        self.next_session += 1
        self.sessions[session] = touched(self.options["session_kib"])
        self.created += 1
        return {"reply": "opened", "session": session}

    def session(self, request, kind):
        session = field(request, "session")
        if session not in self.sessions:
            raise Failure(kind, f"no open session {session}")
        return session

    def close_session(self, request):
        session = self.session(request, "close")
        if self.options["skip_release"]:
            return {"reply": "done"}
        memory = self.sessions.pop(session)
        del memory
        self.deleted += 1
        if self.options["leak_kib"]:
            self.leaked.append(touched(self.options["leak_kib"]))
        return {"reply": "done"}

    def snapshot(self):
        ledger = {self.options["ledger_kind"]: {"created": self.created, "deleted": self.deleted}}
        metrics = {}
        if self.interposer:
            counts = self.interposer()
            for kind, totals in counts.get("kinds", {}).items():
                ledger[kind] = {"created": totals["created"], "deleted": totals["released"]}
            metrics["cl_mem_bytes"] = counts.get("kinds", {}).get("cl_mem", {}).get("live_bytes", 0)
        return {"reply": "snapshot", "snapshot": {"ledger": ledger, "metrics": metrics}}

    def call(self, request):
        call = request.get("call")
        if call == "load":
            return self.load()
        if call == "open_session":
            return self.open_session(field(request, "turn"))
        if call == "send":
            self.session(request, "send")
            return {"reply": "done"}
        if call == "generate":
            self.session(request, "generate")
            if self.options["generate_error"]:
                raise Failure("generate", self.options["generate_error"])
            wanted = field(field(request, "request"), "max_output_tokens")
            cancel = request["request"].get("cancel_after_tokens")
            tokens = min(wanted, cancel) if cancel is not None else wanted
            return {"reply": "generated", "outcome": {"tokens": tokens, "cancelled": cancel is not None and cancel < wanted}}
        if call == "close_session":
            return self.close_session(request)
        if call == "unload":
            self.model = None
            return {"reply": "done"}
        if call == "snapshot":
            return self.snapshot()
        if call == "idle":
            # A real engine waits; this one has nothing to settle.
            return {"reply": "done"}
        if call == "hello":
            raise Failure("protocol", "a second `hello` after the handshake")
        raise Failure("protocol", f"unknown call `{call}`")


def find_interposer():
    """The preloaded interposer's snapshot reader, or None when it is not in this process."""
    try:
        function = ctypes.CDLL(None).leakloop_cl_snapshot
    except (AttributeError, OSError):
        return None
    function.restype = ctypes.c_ssize_t
    function.argtypes = [ctypes.c_char_p, ctypes.c_size_t]

    def read():
        size = 4096
        while True:
            buffer = ctypes.create_string_buffer(size)
            length = function(buffer, size)
            if length < 0:
                return {}
            if length < size:
                return json.loads(buffer.raw[:length])
            size = length + 1

    return read


def main():
    # The protocol owns the original stdout; anything else printed goes to stderr.
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)

    def answer(reply):
        protocol.write(json.dumps(reply) + "\n")
        protocol.flush()

    def fail(kind, message):
        answer({"reply": "failed", "error": {"kind": kind, "message": message}})

    first = sys.stdin.readline()
    if not first:
        return 0
    try:
        hello = json.loads(first)
    except ValueError as error:
        fail("protocol", f"the first line is not JSON: {error}")
        return 2
    if hello.get("call") != "hello":
        fail("protocol", f"the first request must be `hello`, got `{hello.get('call')}`")
        return 2
    if hello.get("version") != PROTOCOL_VERSION:
        fail("protocol", f"this driver speaks protocol version {PROTOCOL_VERSION}, not {hello.get('version')}")
        return 2
    try:
        engine = Engine(hello["engine"])
    except Failure as failure:
        fail(failure.kind, failure.message)
        return 3
    answer({"reply": "hello", "version": PROTOCOL_VERSION, "pid": os.getpid(), "backend": engine.backend()})
    print("reference-sim: engine built", file=sys.stderr)

    for line in sys.stdin:
        try:
            request = json.loads(line)
        except ValueError as error:
            fail("protocol", f"not JSON: {error}")
            return 2
        try:
            answer(engine.call(request))
        except Failure as failure:
            fail(failure.kind, failure.message)
            if failure.kind == "protocol":
                return 2
        except LookupError as error:
            # Missing request fields were refused above as `protocol`; a failed lookup here is
            # the engine's own (an unknown id), so the call fails and the session goes on.
            call = request.get("call")
            fail(CALL_KINDS.get(call, "close"), f"`{call}` failed: no such entry {error}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
