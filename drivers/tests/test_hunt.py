"""Tests of the leak hunt's plan (drivers/hunt/hunt.py): which scenarios a runtime's library holds
and how a release is installed, without installing anything (no network, no build).

The hunt end to end (one installed release) runs in harness/tests/cli/field_results.rs.

Run: python3 -m unittest discover -s drivers/tests -v
"""

from __future__ import annotations

import os
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "drivers", "hunt"))

import hunt  # noqa: E402 - found through the path above


class InstallCommand(unittest.TestCase):
    def test_a_runtime_with_wheels_installs_wheels_only(self):
        args, env, timeout = hunt.install_command("onnxruntime", "1.32.0")
        self.assertEqual(args, ["install", "--only-binary=:all:", "onnxruntime==1.32.0", "numpy"])
        self.assertEqual(env, {})
        self.assertEqual(timeout, 900)

    def test_llama_cpp_python_is_built_from_its_source_with_the_server_extra(self):
        args, env, timeout = hunt.install_command("llama-cpp-python", "0.3.16")
        # Its own --no-binary wins over `:all:` in pip; its dependencies stay wheels.
        self.assertEqual(args[:3], ["install", "--only-binary=:all:",
                                    "--no-binary=llama-cpp-python"])
        self.assertIn("llama-cpp-python[server]==0.3.16", args)
        self.assertIn("-DGGML_NATIVE=OFF", env["CMAKE_ARGS"].split())
        self.assertIn("-DLLAVA_BUILD=OFF", env["CMAKE_ARGS"].split())
        self.assertEqual(timeout, hunt.BUILD_TIMEOUT_S)


class Library(unittest.TestCase):
    def test_llama_cpp_python_runs_the_in_process_and_the_server_scenarios(self):
        found = [os.path.relpath(p, ROOT) for p in hunt.scenarios_of("llama-cpp-python", None)]
        dirs = {os.path.dirname(p) for p in found}
        self.assertEqual(dirs, {os.path.join("fixtures", "llama-cpp"),
                                os.path.join("fixtures", "llama-server")}, found)
        self.assertTrue(all(p.endswith(".yaml") for p in found), found)
        # Every scenario states its verdict, which the hunt compares each run with.
        missing = [p for p in found if hunt.expected_exit(os.path.join(ROOT, p)) is None]
        self.assertEqual(missing, [])

    def test_only_picks_by_file_name(self):
        found = hunt.scenarios_of("llama-cpp-python", ["llama-reuse.yaml"])
        self.assertEqual([os.path.basename(p) for p in found], ["llama-reuse.yaml"])


if __name__ == "__main__":
    unittest.main()
