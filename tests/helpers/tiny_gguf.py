"""A tiny GGUF checkpoint written the way llama.cpp lays one out: a 1-layer Llama with seeded random
weights and the tests' byte-level BPE tokenizer in its metadata (`tokenizer.ggml.*`), as float32
tensors or quantized to Q8_0 (the `gguf` library's reference quantizer)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from harness.reference import train

TEXTS = ["The cat sat on the mat and looked at the bird in the tree.",
         "A dog ran across the park while the children played football.",
         "Rain fell on the city all night, and the streets were quiet."] * 4
WIDTH, FEED_FORWARD, HEADS = 32, 64, 2  # Q8_0 packs rows in blocks of 32 numbers
LAYER_TENSORS = {"attn_norm": (WIDTH,), "attn_q": (WIDTH, WIDTH), "attn_k": (WIDTH, WIDTH), "attn_v": (WIDTH, WIDTH),
                 "attn_output": (WIDTH, WIDTH), "ffn_norm": (WIDTH,), "ffn_gate": (FEED_FORWARD, WIDTH),
                 "ffn_up": (FEED_FORWARD, WIDTH), "ffn_down": (WIDTH, FEED_FORWARD)}


def save_tiny_gguf(path: Path, quantize: bool = False, architecture: str = "llama", leave_out: str | None = None,
                   seed: int = 0) -> Path:
    """Write the tiny Llama to `path` (a `.gguf` file); `leave_out` names a tensor not to write."""
    import gguf

    tokenizer = train.train_tokenizer(TEXTS, vocab_size=300)
    model = json.loads(tokenizer.backend_tokenizer.to_str())["model"]
    tokens = [token for token, _ in sorted(model["vocab"].items(), key=lambda item: item[1])]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    eos = tokenizer.convert_tokens_to_ids(train.DOC_SEPARATOR)
    qtype = gguf.GGMLQuantizationType.Q8_0 if quantize else gguf.GGMLQuantizationType.F32

    path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_name("tiny llama")
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if quantize else gguf.LlamaFileType.ALL_F32)
    writer.add_context_length(64)
    writer.add_embedding_length(WIDTH)
    writer.add_block_count(1)
    writer.add_feed_forward_length(FEED_FORWARD)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(HEADS)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(len(tokens))
    writer.add_rope_dimension_count(WIDTH // HEADS)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types([gguf.TokenType.NORMAL] * len(tokens))
    writer.add_token_merges(merges)
    writer.add_bos_token_id(eos)
    writer.add_eos_token_id(eos)

    rng = np.random.default_rng(seed)
    shapes = {"token_embd.weight": (len(tokens), WIDTH), "output_norm.weight": (WIDTH,),
              "output.weight": (len(tokens), WIDTH),
              **{f"blk.0.{name}.weight": shape for name, shape in LAYER_TENSORS.items()}}
    for name, shape in shapes.items():
        if name == leave_out:
            continue
        values = (np.ones(shape) if len(shape) == 1 else rng.normal(0, 0.2, shape)).astype(np.float32)
        if len(shape) == 2 and quantize:
            writer.add_tensor(name, gguf.quants.quantize(values, qtype), raw_dtype=qtype)
        else:
            writer.add_tensor(name, values)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
