"""Tests of the LiteRT Interpreter driver (drivers/litert-interpreter/litert_interpreter.py).

Its ledger counts a kind as deleted when the runtime frees it, not when the driver lets go.

They need the `ai_edge_litert` package (`python3 -m pip install ai-edge-litert==2.3.0`); without it
they are skipped with a `SKIPPED:` reason, and fail instead when LEAKLOOP_REQUIRE_PYTHON=1 (as in
CI). The driver's scenarios and conformance run in harness/tests/cli/litert_interpreter.rs.

Run: python3 -m unittest discover -s drivers/tests -v
"""

from __future__ import annotations

import gc
import importlib.util
import os
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "drivers", "litert-interpreter"))
MODEL = os.path.join(ROOT, "fixtures", "models", "tiny-mlp.tflite")
HAVE_PACKAGE = importlib.util.find_spec("ai_edge_litert") is not None
REQUIRED = os.environ.get("LEAKLOOP_REQUIRE_PYTHON") == "1"
MISSING = "ai_edge_litert is not installed (python3 -m pip install ai-edge-litert==2.3.0)"


def driver(**options):
    import litert_interpreter
    import numpy as np
    from ai_edge_litert import interpreter

    engine = {"model": MODEL, "device": "cpu"}
    return litert_interpreter.Driver(engine, litert_interpreter.Options(**options), interpreter, np)


def counts(d, kind):
    entry = d.snapshot()["snapshot"]["ledger"].get(kind, {"created": 0, "deleted": 0})
    return entry["created"], entry["deleted"]


def one_request(d, tokens=4, steps=3, cancel_after=None):
    session = d.open_session(1, {})["session"]
    d.send(session, {"text": "rows", "tokens": tokens})
    reply = d.generate(session, {"max_output_tokens": steps, "cancel_after_tokens": cancel_after})
    d.close_session(session)
    return reply


@unittest.skipUnless(HAVE_PACKAGE or REQUIRED, f"SKIPPED: {MISSING}")
class LedgerFollowsTheRuntime(unittest.TestCase):
    def setUp(self):
        if not HAVE_PACKAGE:
            self.fail(f"LEAKLOOP_REQUIRE_PYTHON=1 but {MISSING}")

    def test_a_view_keeps_the_native_interpreter_and_its_count(self):
        d = driver(lifecycle="reuse")
        d.load()
        one_request(d)
        # A NumPy view of an output holds the binding's wrapper: the native interpreter outlives
        # the `Interpreter` object, and the ledger must say so.
        view = d.shared.tensor(d.shared.get_output_details()[0]["index"])()
        d.unload()
        gc.collect()
        self.assertEqual(counts(d, "interpreter"), (1, 0))
        del view
        self.assertEqual(counts(d, "interpreter"), (1, 1))

    def test_per_request_interpreters_are_freed_at_close_unless_kept(self):
        for release, deleted in (("drop", 3), ("keep", 0)):
            d = driver(lifecycle="per_request", release=release)
            d.load()
            for _ in range(3):
                one_request(d)
            self.assertEqual(counts(d, "interpreter"), (3, deleted), release)

    def test_outputs_are_counted_until_freed_or_kept(self):
        for keep, deleted in ((False, 6), (True, 0)):
            d = driver(keep_outputs=keep)
            d.load()
            one_request(d, steps=3)
            one_request(d, steps=3)
            self.assertEqual(counts(d, "output"), (6, deleted), keep)

    def test_a_cancel_stops_invoking_and_abandon_keeps_the_interpreter(self):
        for cancel, interpreters in (("stop", (1, 0)), ("abandon", (2, 0))):
            d = driver(cancel=cancel)
            d.load()
            reply = one_request(d, steps=8, cancel_after=2)
            self.assertEqual(reply["outcome"], {"tokens": 2, "cancelled": True})
            self.assertEqual(counts(d, "output"), (2, 2))
            # abandon: the shared interpreter went to the orphaned worker, a fresh one replaced it.
            self.assertEqual(counts(d, "interpreter"), interpreters, cancel)

    def test_a_kept_view_keeps_its_interpreter_and_blocks_the_next_invoke(self):
        import litert_interpreter

        # Per request, one invoke each: every kept 1 KiB view holds a whole interpreter.
        d = driver(lifecycle="per_request", read="view", keep_outputs=True)
        d.load()
        for _ in range(3):
            one_request(d, tokens=1, steps=1)
        self.assertEqual(counts(d, "interpreter"), (3, 0))
        self.assertEqual(counts(d, "output"), (3, 0))
        # Reused: the runtime refuses the second invoke while the first output's view is held.
        d = driver(read="view", keep_outputs=True)
        d.load()
        with self.assertRaises(litert_interpreter.DriverError) as caught:
            one_request(d, tokens=1, steps=2)
        self.assertEqual(caught.exception.kind, "generate")
        self.assertIn("at least 1 reference to internal data", str(caught.exception))

    def test_a_shape_change_resizes_the_input(self):
        d = driver()
        d.load()
        for rows in (1, 16, 64, 200):
            one_request(d, tokens=rows, steps=1)
            shape = list(d.shared.get_input_details()[0]["shape"])
            self.assertEqual(shape, [min(rows, 64), 256])

    def test_an_unknown_option_is_refused(self):
        import litert_interpreter

        for given, says in (({"lifecycle": "forever"}, "option `lifecycle`"),
                            ({"num_threads": 0}, "num_threads"),
                            ({"threads": 2}, "unknown option `threads`")):
            with self.assertRaises(litert_interpreter.DriverError) as caught:
                litert_interpreter.Options.parse(given)
            self.assertEqual(caught.exception.kind, "unavailable")
            self.assertIn(says, str(caught.exception))


if __name__ == "__main__":
    unittest.main()
