"""Tests of drivers/litert_lm_python.py, speaking the worker protocol to the driver as leakloop does.

The protocol checks need only Python. The engine checks need the `litert_lm` package
(`python3 -m pip install litert-lm-api==0.18.1`); without it they are skipped with a `SKIPPED:`
reason, and fail instead when LEAKLOOP_REQUIRE_ENGINE=1 (as in CI). What they assert about the
binding's failure modes is what was measured on litert-lm-api 0.18.1 (docs/litert-lm-python.md).

Run: python3 -m unittest discover -s drivers/tests -v
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DRIVER = os.path.join(ROOT, "drivers", "litert_lm_python.py")
MODEL = os.path.join(ROOT, "fixtures", "models", "tiny-qwen2-f32.litertlm")
HAVE_PACKAGE = importlib.util.find_spec("litert_lm") is not None
REQUIRED = os.environ.get("LEAKLOOP_REQUIRE_ENGINE") == "1"
MISSING = "litert_lm is not installed (python3 -m pip install litert-lm-api==0.18.1)"
PROMPT = "Count the buffers in the cache and explain why."


def needs_engine(test):
    """Skips `test` when the package is absent, or fails it when the engine is required."""
    if HAVE_PACKAGE:
        return test
    if REQUIRED:
        def fail(self):
            self.fail(f"LEAKLOOP_REQUIRE_ENGINE=1 but {MISSING}")

        fail.__name__ = test.__name__
        return fail
    return unittest.skip(f"SKIPPED: {MISSING}")(test)


def hello(version=2, **options):
    """A `hello` request for the tiny model with `options` as the scenario's engine.options."""
    engine = {"backend": "exec", "model": MODEL, "device": "cpu", "max_tokens": 1024,
              "lib": None, "profile": None, "seed": 0, "options": options}
    return {"call": "hello", "version": version, "engine": engine}


class Driver:
    """The driver as a child process: one request line in, one reply line out."""

    def __init__(self):
        self.log = tempfile.TemporaryFile(mode="w+")
        self.stderr = ""
        self.process = subprocess.Popen(
            [sys.executable, DRIVER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            # A file, not a pipe: the library logs a lot, and a full pipe would block the driver.
            stderr=self.log,
            text=True,
        )

    def raw(self, line: str):
        self.process.stdin.write(line)
        self.process.stdin.flush()
        reply = self.process.stdout.readline()
        return json.loads(reply) if reply else None

    def call(self, request: dict):
        reply = self.raw(json.dumps(request) + "\n")
        if reply is None:
            raise ConnectionError(f"the driver ended: {self.finish()}")
        return reply

    def ledger(self):
        return self.call({"call": "snapshot"})["snapshot"]["ledger"]

    def turn(self, turn: int, *, cancel_after=None, close=True):
        session = self.call({"call": "open_session", "turn": turn, "options": {}})["session"]
        self.call({"call": "send", "session": session, "prompt": {"text": PROMPT, "tokens": 9}})
        outcome = self.call({
            "call": "generate",
            "session": session,
            "request": {"max_output_tokens": 32, "cancel_after_tokens": cancel_after},
        })
        if close:
            self.assert_done(self.call({"call": "close_session", "session": session}))
        return session, outcome

    @staticmethod
    def assert_done(body):
        if body != {"reply": "done"}:
            raise AssertionError(f"expected done, got {body}")

    def finish(self, timeout=60):
        """Closes stdin and returns the exit status (negative: killed by that signal)."""
        try:
            self.process.stdin.close()
        except BrokenPipeError:
            pass
        code = self.process.wait(timeout=timeout)
        self.log.seek(0)
        self.stderr = self.log.read()
        self.log.close()
        self.process.stdout.close()
        return code


def counts(ledger, kind):
    entry = ledger.get(kind, {"created": 0, "deleted": 0})
    return entry["created"], entry["deleted"]


class ProtocolTest(unittest.TestCase):
    """What the driver says to bad input, with or without the package."""

    def test_the_first_request_must_be_hello(self):
        driver = Driver()
        body = driver.call({"call": "load"})
        self.assertEqual(body["reply"], "failed")
        self.assertEqual(body["error"]["kind"], "protocol")
        self.assertIn("the first request must be `hello`, got `load`", body["error"]["message"])
        self.assertEqual(driver.finish(), 1)

    def test_another_protocol_version_is_refused(self):
        driver = Driver()
        body = driver.call(hello(version=1))
        self.assertEqual(body["error"]["kind"], "protocol")
        self.assertIn("the runner speaks 1, this driver speaks 2", body["error"]["message"])
        self.assertEqual(driver.finish(), 1)

    def test_an_unknown_option_is_refused_with_the_known_ones(self):
        driver = Driver()
        body = driver.call(hello(relase="drop"))
        self.assertEqual(body["error"]["kind"], "unavailable")
        self.assertIn("unknown option `relase` (this driver knows release, gc,", body["error"]["message"])
        self.assertEqual(driver.finish(), 1)

    def test_a_bad_option_value_names_the_allowed_ones(self):
        driver = Driver()
        body = driver.call(hello(gc=False))
        self.assertEqual(body["error"]["message"], 'option `gc`: false is not "on" or "off"')
        self.assertEqual(driver.finish(), 1)

    def test_a_line_that_is_not_json_is_quoted(self):
        driver = Driver()
        body = driver.raw("running 1 test\n")
        self.assertEqual(body["error"]["kind"], "protocol")
        self.assertIn("`running 1 test`", body["error"]["message"])
        self.assertEqual(driver.finish(), 1)

    def test_ending_input_before_hello_is_a_clean_exit(self):
        self.assertEqual(Driver().finish(), 0)

    def test_arguments_are_refused(self):
        run = subprocess.run([sys.executable, DRIVER, "--release", "drop"], capture_output=True,
                             text=True, check=False)
        self.assertEqual(run.returncode, 2)
        self.assertIn("takes no arguments", run.stderr)


class EngineTest(unittest.TestCase):
    """The tiny model through the binding, on the CPU."""

    def setUp(self):
        self.driver = None

    def tearDown(self):
        if self.driver and self.driver.process.poll() is None:
            self.driver.process.kill()
            self.driver.finish()

    def start(self, **options):
        self.driver = Driver()
        hello_reply = self.driver.call(hello(**options))
        self.assertEqual(hello_reply["reply"], "hello", hello_reply)
        loaded = self.driver.call({"call": "load"})
        self.assertEqual(loaded["reply"], "loaded", loaded)
        return hello_reply, loaded

    @needs_engine
    def test_hello_names_the_binding_and_its_version(self):
        hello_reply, loaded = self.start()
        self.assertEqual(hello_reply["backend"]["backend"], "litert-lm-python")
        self.assertEqual(hello_reply["pid"], self.driver.process.pid)
        self.assertRegex(loaded["backend"]["version"], r"^\d+\.\d+")
        self.assertTrue(loaded["backend"]["details"]["library"].endswith("liblitert-lm.so"))

    @needs_engine
    def test_a_chat_loop_balances_every_handle(self):
        self.start(count_wrappers=True)
        for turn in (1, 2, 3):
            _, outcome = self.driver.turn(turn)
            self.assertEqual(outcome["reply"], "generated")
            self.assertGreater(outcome["outcome"]["tokens"], 0)
            self.assertFalse(outcome["outcome"]["cancelled"])
        snapshot = self.driver.call({"call": "snapshot"})["snapshot"]
        self.assertGreater(snapshot["metrics"]["native_heap"], 1 << 20)
        ledger = snapshot["ledger"]
        for kind in ("conversation", "conversation_config", "session_config", "response",
                     "py_conversation"):
            self.assertEqual(counts(ledger, kind), (3, 3), kind)
        self.assertEqual(counts(ledger, "engine"), (1, 0))
        self.driver.assert_done(self.driver.call({"call": "idle", "duration_ms": 5}))
        self.driver.assert_done(self.driver.call({"call": "unload"}))
        self.assertEqual(counts(self.driver.ledger(), "engine"), (1, 1))
        self.assertEqual(self.driver.finish(), 0)

    @needs_engine
    def test_wrappers_are_counted_only_when_asked(self):
        self.start()
        self.driver.turn(1)
        self.assertNotIn("py_conversation", self.driver.ledger())

    @needs_engine
    def test_an_unknown_call_or_a_second_hello_ends_the_session(self):
        for request in ({"call": "explode"}, hello()):
            with self.subTest(request["call"]):
                self.start()
                body = self.driver.call(request)
                self.assertEqual(body["error"]["kind"], "protocol", body)
                self.assertEqual(self.driver.finish(), 1)

    @needs_engine
    def test_a_missing_model_is_unavailable(self):
        self.driver = Driver()
        request = hello()
        request["engine"]["model"] = "/nonexistent/tiny.litertlm"
        self.assertEqual(self.driver.call(request)["reply"], "hello")
        body = self.driver.call({"call": "load"})
        self.assertEqual(body["error"], {"kind": "unavailable",
                                         "message": "model file not found: /nonexistent/tiny.litertlm"})
        self.assertEqual(self.driver.finish(), 1)

    @needs_engine
    def test_cancel_after_four_chunks(self):
        self.start()
        _, outcome = self.driver.turn(1, cancel_after=4)
        self.assertEqual(outcome["outcome"], {"tokens": 4, "cancelled": True})
        # The conversation stays usable for a blocking reply after the cancel... on a new one.
        _, outcome = self.driver.turn(2)
        self.assertFalse(outcome["outcome"]["cancelled"])
        self.assertEqual(counts(self.driver.ledger(), "conversation"), (2, 2))

    @needs_engine
    def test_a_dropped_blocking_conversation_is_freed_by_its_reference_count(self):
        self.start(release="drop", gc="off")
        for turn in (1, 2, 3):
            self.driver.turn(turn)
        self.assertEqual(counts(self.driver.ledger(), "conversation"), (3, 3))

    @needs_engine
    def test_a_streamed_conversation_waits_for_the_cyclic_collector(self):
        # A streamed reply leaves the wrapper in a cycle (conversation -> its stream callback ->
        # the closure over the conversation): its reference count never reaches zero. Dropped,
        # its C conversation is never deleted without the collector; closed, the handle is freed
        # but the wrapper still waits.
        for release, deleted in (("drop", 0), ("close", 3)):
            with self.subTest(release=release):
                self.start(release=release, gc="off", count_wrappers=True)
                for turn in (1, 2, 3):
                    self.driver.turn(turn, cancel_after=4)
                ledger = self.driver.ledger()
                self.assertEqual(counts(ledger, "conversation"), (3, deleted))
                self.assertEqual(counts(ledger, "py_conversation"), (3, 0))
                self.driver.finish()

    @needs_engine
    def test_closing_one_conversation_after_its_engine_works(self):
        self.start()
        session, _ = self.driver.turn(1, close=False)
        self.driver.assert_done(self.driver.call({"call": "unload"}))
        self.driver.assert_done(self.driver.call({"call": "close_session", "session": session}))
        self.assertEqual(counts(self.driver.ledger(), "conversation"), (1, 1))
        self.assertEqual(self.driver.finish(), 0)

    @needs_engine
    def test_closing_two_conversations_after_their_engine_kills_the_process(self):
        # Measured on 0.18.1: Engine.close() deletes the engine under its live conversations; the
        # first conversation_delete after that aborts ("LiteRT check failed ...
        # litert_destroy_tensor_buffer") or segfaults.
        self.start()
        first, _ = self.driver.turn(1, close=False)
        self.driver.turn(2, close=False)
        self.driver.assert_done(self.driver.call({"call": "unload"}))
        with self.assertRaises(ConnectionError):
            self.driver.call({"call": "close_session", "session": first})
        code = self.driver.process.returncode
        self.assertIn(-code, (signal.SIGABRT, signal.SIGSEGV), f"exit {code}: {self.driver.stderr[-2000:]}")


    @needs_engine
    def test_leftovers_closed_after_unload_kill_the_driver_during_unload(self):
        self.start(at_unload="close")
        self.driver.turn(1, close=False)
        self.driver.turn(2, close=False)
        with self.assertRaises(ConnectionError):
            self.driver.call({"call": "unload"})
        code = self.driver.process.returncode
        self.assertIn(-code, (signal.SIGABRT, signal.SIGSEGV), f"exit {code}: {self.driver.stderr[-2000:]}")


if __name__ == "__main__":
    unittest.main()
