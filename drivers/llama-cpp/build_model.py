#!/usr/bin/env python3
"""Writes the llama.cpp driver's tiny model, `tiny-llama.gguf`, with the `gguf` package.

The model is a llama-architecture decoder (2 blocks, 64-wide embeddings, 4 attention heads of
which 2 key/value heads, a 128-wide feed-forward) over a 300-token SentencePiece-style vocabulary:
the control tokens, the 256 byte-fallback tokens and a few word pieces, so that any text
tokenizes. Weights are seeded pseudo-random numbers: the model computes nothing useful, it only
has to load, evaluate and generate like a real one, with a key/value cache, logits and state that
llama.cpp and llama-cpp-python allocate as they do for any model.

    python3 -m pip install gguf==0.19.0
    python3 drivers/llama-cpp/build_model.py   # rewrites fixtures/models/tiny-llama.gguf

The output is byte-for-byte the same on every run (fixed seed, fixed layout, no timestamps).
"""

from __future__ import annotations

import os
import sys
import tempfile

import gguf
import numpy as np

SEED = 26
BLOCKS = 2
EMBED = 64
HEADS = 4
KV_HEADS = 2
FEED_FORWARD = 128
CONTEXT = 4096
# Word pieces after the control and byte tokens; SentencePiece marks a word start with U+2581.
PIECES = ["\u2581", "\u2581the", "\u2581a", "\u2581cache", "\u2581engine", "\u2581model", "e", "t",
          "a", "o", "n", "s", "r", "i", "l", "d", "h", "c", "u", "m", "p", "g", "y", "w", "f",
          "b", "k", "v", ".", ",", "?", "!", "\u2581session", "\u2581prompt", "\u2581turn",
          "\u2581request", "\u2581reply", "\u2581memory", "\u2581leak", "\u2581token", "\u2581of",
          "\u2581and", "\u2581to", "\u2581in"]


def vocabulary() -> tuple[list[bytes], list[float], list[int]]:
    """Tokens, their scores and their types: <unk>, <s>, </s>, the 256 bytes, the pieces."""
    tokens = [b"<unk>", b"<s>", b"</s>"]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    for byte in range(256):
        tokens.append(f"<0x{byte:02X}>".encode())
        types.append(gguf.TokenType.BYTE)
    for piece in PIECES:
        tokens.append(piece.encode("utf-8"))
        types.append(gguf.TokenType.NORMAL)
    # llama.cpp's SentencePiece tokenizer only merges pairs that are themselves in the vocabulary,
    # so the word pieces are rarely reached: text tokenizes to about one token per character.
    scores = [0.0] * (3 + 256) + [float(len(p)) - 10.0 for p in PIECES]
    return tokens, scores, [int(t) for t in types]


def tensors(vocab: int) -> list[tuple[str, np.ndarray]]:
    """The model's tensors by their GGUF names; numpy shapes are (rows, columns)."""
    rng = np.random.default_rng(SEED)

    def matrix(rows: int, columns: int) -> np.ndarray:
        return (rng.standard_normal((rows, columns), dtype=np.float32) / np.sqrt(columns)).astype(np.float32)

    def ones(n: int) -> np.ndarray:
        return np.ones(n, dtype=np.float32)

    head = EMBED // HEADS
    out = [("token_embd.weight", matrix(vocab, EMBED))]
    for b in range(BLOCKS):
        out += [
            (f"blk.{b}.attn_norm.weight", ones(EMBED)),
            (f"blk.{b}.attn_q.weight", matrix(EMBED, EMBED)),
            (f"blk.{b}.attn_k.weight", matrix(KV_HEADS * head, EMBED)),
            (f"blk.{b}.attn_v.weight", matrix(KV_HEADS * head, EMBED)),
            (f"blk.{b}.attn_output.weight", matrix(EMBED, EMBED)),
            (f"blk.{b}.ffn_norm.weight", ones(EMBED)),
            (f"blk.{b}.ffn_gate.weight", matrix(FEED_FORWARD, EMBED)),
            (f"blk.{b}.ffn_up.weight", matrix(FEED_FORWARD, EMBED)),
            (f"blk.{b}.ffn_down.weight", matrix(EMBED, FEED_FORWARD)),
        ]
    out += [("output_norm.weight", ones(EMBED)), ("output.weight", matrix(vocab, EMBED))]
    return out


def write(target: str) -> int:
    """Writes the model to `target` and returns its size in bytes."""
    tokens, scores, types = vocabulary()
    writer = gguf.GGUFWriter(target, "llama")
    writer.add_name("leakloop tiny llama (drivers/llama-cpp/build_model.py)")
    writer.add_context_length(CONTEXT)
    writer.add_embedding_length(EMBED)
    writer.add_block_count(BLOCKS)
    writer.add_feed_forward_length(FEED_FORWARD)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_rope_dimension_count(EMBED // HEADS)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(len(tokens))
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    for name, data in tensors(len(tokens)):
        writer.add_tensor(name, data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return os.path.getsize(target)


def main(argv: list[str]) -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    target = argv[0] if argv else os.path.join(here, "..", "..", "fixtures", "models", "tiny-llama.gguf")
    # Written next to the target and renamed over it: a failed build leaves the old model intact.
    folder = os.path.dirname(os.path.abspath(target))
    fd, partial = tempfile.mkstemp(prefix=".tiny-llama-", suffix=".gguf", dir=folder)
    os.close(fd)
    try:
        size = write(partial)
        os.chmod(partial, 0o644)  # mkstemp's file is private; a model is not
        os.replace(partial, target)
    finally:
        if os.path.exists(partial):
            os.remove(partial)
    print(f"wrote {target} ({size} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
