"""Tests of the allocation-site capability the Python drivers share (`CommonCalls` and `serve` in
drivers/litert_lm_python.py; docs/protocol.md, "Allocation sites").

The helper checks need only Python (the module is imported, its engine is not built). The engine
check needs the `litert_lm` package, and is skipped with a `SKIPPED:` reason without it (a
failure with LEAKLOOP_REQUIRE_ENGINE=1, as in CI).

Run: python3 -m unittest discover -s drivers/tests -v
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import sys
import tracemalloc
import unittest

from test_litert_lm_python import Driver, hello, needs_engine

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "drivers"))
import litert_lm_python as helpers  # noqa: E402 - the path above makes it importable


class Tiny(helpers.CommonCalls):
    """A driver with no engine: what the shared helpers give every Python driver."""

    def __init__(self):
        self.ledger = helpers.Ledger()
        self.sessions = {}
        self.kept = []

    def describe(self):
        return {"backend": "tiny", "version": "1"}

    def keep(self):
        self.kept.append(bytearray(10_000))
        return {"reply": "done"}


def line_of(path, text):
    """The first line of `path` that holds `text`, 1-based."""
    with open(path, encoding="utf-8") as source:
        return next(i for i, line in enumerate(source, 1) if text in line)


def serve(*requests):
    """The replies of the shared serve loop to `requests` (a `hello` first)."""
    stdin = io.StringIO("".join(json.dumps(r) + "\n" for r in requests))
    out = io.StringIO()
    helpers.serve(stdin, out, build=lambda first: Tiny())
    return [json.loads(line) for line in out.getvalue().splitlines()]


class SitesTest(unittest.TestCase):
    def tearDown(self):
        tracemalloc.stop()

    def test_hello_offers_tracemalloc_and_start_sites_starts_it(self):
        replies = serve(hello(), {"call": "start_sites", "frames": 8}, {"call": "snapshot"})
        self.assertEqual(replies[0]["sites"], {"source": "tracemalloc"})
        self.assertEqual(replies[1], {"reply": "done"})
        self.assertIsInstance(replies[2]["sites"], list)
        self.assertIn("ledger", replies[2]["snapshot"])

    def test_a_snapshot_without_start_sites_is_as_before(self):
        replies = serve(hello(), {"call": "snapshot"})
        self.assertNotIn("sites", replies[1])
        self.assertFalse(tracemalloc.is_tracing())

    def test_start_sites_refuses_frames_out_of_range(self):
        for frames in (0, 65, "8"):
            replies = serve(hello(), {"call": "start_sites", "frames": frames})
            self.assertEqual(replies[1]["reply"], "failed", replies)
            self.assertIn("frames must be 1 to 64", replies[1]["error"]["message"])

    def test_memory_kept_by_the_driver_is_counted_to_its_line_innermost_first(self):
        driver = Tiny()
        driver.start_sites(16)
        for _ in range(3):
            driver.keep()
        sites = driver.snapshot()["sites"]
        line = line_of(__file__, "bytearray(10_000)")
        top = sites[0]
        self.assertGreaterEqual(top["bytes"], 30_000, sites[:3])
        self.assertEqual(top["frames"][0]["file"], __file__)
        self.assertEqual(top["frames"][0]["line"], line)
        self.assertEqual(top["frames"][0]["function"], "Tiny.keep")
        # Caps: at most MAX_SITES sites and MAX_FRAMES frames, and nothing of the measuring.
        self.assertLessEqual(len(sites), helpers.MAX_SITES)
        for site in sites:
            self.assertLessEqual(len(site["frames"]), helpers.MAX_FRAMES)
            for frame in site["frames"]:
                self.assertNotIn(frame["function"], helpers.MEASURING)
                self.assertFalse(frame["file"].endswith("tracemalloc.py"), site)

    def test_a_function_is_named_by_the_definition_around_its_line(self):
        source = helpers.__file__
        line = line_of(source, "def site_frames")
        self.assertEqual(helpers.function_at(source, line + 3), "site_frames")
        self.assertEqual(helpers.function_at(source, 1), "<module>")
        self.assertEqual(helpers.function_at("/no/such/file.py", 3), "<module>")


class EngineSitesTest(unittest.TestCase):
    @needs_engine
    def test_kept_chunks_grow_at_the_line_that_appends_them(self):
        driver = Driver()
        try:
            reply = driver.call(hello(keep_chunks=True))
            self.assertEqual(reply["sites"], {"source": "tracemalloc"})
            driver.assert_done(driver.call({"call": "start_sites", "frames": 16}))
            self.assertEqual(driver.call({"call": "load"})["reply"], "loaded")
            sizes = []
            for turn in (1, 2, 3, 4):
                driver.turn(turn)
                sites = driver.call({"call": "snapshot"})["sites"]
                top = sites[0]["frames"][0]
                self.assertEqual(top["function"], "Driver.generate", sites[:2])
                sizes.append(sites[0]["bytes"])
            self.assertEqual(sizes, sorted(sizes))
            self.assertGreater(sizes[-1] - sizes[0], 3 * 8 * 1024, sizes)
        finally:
            driver.process.kill()
            driver.finish()


if __name__ == "__main__":
    unittest.main()
