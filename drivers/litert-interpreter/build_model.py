#!/usr/bin/env python3
"""Writes the LiteRT Interpreter driver's tiny model, `tiny-mlp.tflite`, without TensorFlow.

The model is two fully connected layers, float32 input `x` of shape [rows, 256] (rows is dynamic:
the shape signature is [-1, 256], so the driver resizes it per request, a shape mix), 512 hidden
units with ReLU, and a [rows, 256] output `y`. Weights are seeded pseudo-random numbers: the
model computes nothing useful, it only has to load, allocate and run like a real one, and its
1 MiB of weights makes every interpreter that is not freed visible in the process's memory
(XNNPACK packs a private copy of the weights per interpreter).

The flatbuffer is written with the TFLite schema module that `ai-edge-litert` ships
(`ai_edge_litert.schema_py_generated`, object API) and the `flatbuffers` package it depends on,
so rebuilding needs only the driver's own runtime:

    python3 -m pip install ai-edge-litert==2.3.0
    python3 drivers/litert-interpreter/build_model.py   # rewrites fixtures/models/tiny-mlp.tflite

The output is byte-for-byte the same on every run (fixed seed, fixed layout).
"""

from __future__ import annotations

import os
import sys

import flatbuffers
import numpy as np
from ai_edge_litert import schema_py_generated as schema

FEATURES = 256
HIDDEN = 512
SEED = 26
FILE_IDENTIFIER = b"TFL3"


def buffer(array: np.ndarray | None) -> schema.BufferT:
    """A model buffer holding `array`'s bytes (little-endian), or an empty one."""
    out = schema.BufferT()
    if array is not None:
        out.data = np.frombuffer(array.astype("<f4").tobytes(), dtype=np.uint8)
    return out


def tensor(name: str, shape: list[int], buffer_index: int, signature=None) -> schema.TensorT:
    out = schema.TensorT()
    out.name = name
    out.shape = shape
    out.shapeSignature = signature
    out.type = schema.TensorType.FLOAT32
    out.buffer = buffer_index
    return out


def fully_connected(inputs: list[int], output: int, relu: bool) -> schema.OperatorT:
    options = schema.FullyConnectedOptionsT()
    options.fusedActivationFunction = (
        schema.ActivationFunctionType.RELU if relu else schema.ActivationFunctionType.NONE
    )
    op = schema.OperatorT()
    op.opcodeIndex = 0
    op.inputs = inputs
    op.outputs = [output]
    op.builtinOptionsType = schema.BuiltinOptions.FullyConnectedOptions
    op.builtinOptions = options
    return op


def model() -> schema.ModelT:
    rng = np.random.default_rng(SEED)
    w1 = rng.standard_normal((HIDDEN, FEATURES), dtype=np.float32) / np.sqrt(FEATURES)
    b1 = np.zeros(HIDDEN, dtype=np.float32)
    w2 = rng.standard_normal((FEATURES, HIDDEN), dtype=np.float32) / np.sqrt(HIDDEN)
    b2 = np.zeros(FEATURES, dtype=np.float32)

    # Buffer 0 is the schema's conventional empty buffer; activations use it.
    buffers = [buffer(None), buffer(w1), buffer(b1), buffer(w2), buffer(b2)]
    tensors = [
        tensor("x", [1, FEATURES], 0, [-1, FEATURES]),
        tensor("w1", [HIDDEN, FEATURES], 1),
        tensor("b1", [HIDDEN], 2),
        tensor("hidden", [1, HIDDEN], 0, [-1, HIDDEN]),
        tensor("w2", [FEATURES, HIDDEN], 3),
        tensor("b2", [FEATURES], 4),
        tensor("y", [1, FEATURES], 0, [-1, FEATURES]),
    ]
    graph = schema.SubGraphT()
    graph.name = "main"
    graph.tensors = tensors
    graph.inputs = [0]
    graph.outputs = [6]
    graph.operators = [fully_connected([0, 1, 2], 3, True), fully_connected([3, 4, 5], 6, False)]

    code = schema.OperatorCodeT()
    code.builtinCode = schema.BuiltinOperator.FULLY_CONNECTED
    code.deprecatedBuiltinCode = schema.BuiltinOperator.FULLY_CONNECTED
    code.version = 1

    out = schema.ModelT()
    out.version = 3
    out.description = "leakloop tiny MLP (drivers/litert-interpreter/build_model.py)"
    out.operatorCodes = [code]
    out.subgraphs = [graph]
    out.buffers = buffers
    return out


def serialize(m: schema.ModelT) -> bytes:
    builder = flatbuffers.Builder(2 << 20)
    builder.Finish(m.Pack(builder), file_identifier=FILE_IDENTIFIER)
    return bytes(builder.Output())


def main(argv: list[str]) -> int:
    target = argv[0] if argv else os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "models", "tiny-mlp.tflite")
    data = serialize(model())
    with open(target, "wb") as f:
        f.write(data)
    print(f"wrote {target} ({len(data)} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
