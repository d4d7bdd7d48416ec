#!/usr/bin/env python3
"""Bytes a batch-1 decode step must read, from a model directory's safetensors headers and
config.json (no weights are read): every tensor the step uses at its stored size, the routed
experts' tensors scaled by top_k / num_experts (one token picks top_k of them), the embedding's
one row (the whole table when tied to the LM head), the KV cache of the attention layers at the
given context (BF16; sliding layers up to their window), and each linear-attention layer's
recurrent state and conv window (FP32, read and written). The MTP module is not part of a step.
With --copy-gbps (the copy bandwidth measured in the same run, read + write counted) and --tok-s
(the measured decode rate) it prints the roofline and the fraction of it reached.

Usage: decode_bytes.py MODEL_DIR [--context 640] [--copy-gbps 3019] [--tok-s 421.8]
"""
import argparse
import json
import pathlib
import struct


def tensor_sizes(model_dir):
    sizes = {}
    for f in sorted(pathlib.Path(model_dir).glob("*.safetensors")):
        with open(f, "rb") as fh:
            (n,) = struct.unpack("<Q", fh.read(8))
            header = json.loads(fh.read(n))
        for name, info in header.items():
            if name != "__metadata__":
                begin, end = info["data_offsets"]
                sizes[name] = end - begin
    return sizes


def layer_kinds(c):
    layers = c["num_hidden_layers"]
    if "layer_types" in c and c["layer_types"]:
        return list(c["layer_types"])[:layers]
    if c.get("model_type") == "qwen3_next":
        interval = c.get("full_attention_interval", 4)
        return ["linear_attention" if (i + 1) % interval else "full_attention" for i in range(layers)]
    return ["full_attention"] * layers


def step_bytes(model_dir, context):
    c = json.loads((pathlib.Path(model_dir) / "config.json").read_text())
    sizes = tensor_sizes(model_dir)
    experts = c.get("num_experts") or c.get("num_local_experts") or 0
    top_k = c.get("num_experts_per_tok") or c.get("experts_per_token") or 0
    hidden, tied = c["hidden_size"], c.get("tie_word_embeddings", False)
    weights = 0.0
    for name, size in sizes.items():
        if name.startswith("mtp."):
            continue
        if "embed_tokens" in name:
            weights += size if tied else size / c["vocab_size"]
        elif ".experts." in name and experts:
            weights += size * top_k / experts
        else:
            weights += size
    kv = state = 0.0
    head_dim = c.get("head_dim") or hidden // c["num_attention_heads"]
    for kind in layer_kinds(c):
        if kind == "linear_attention":
            v_heads, k_dim = c["linear_num_value_heads"], c["linear_key_head_dim"]
            v_dim, k_heads = c["linear_value_head_dim"], c["linear_num_key_heads"]
            conv_dim = 2 * k_heads * k_dim + v_heads * v_dim
            state += 2 * 4 * (v_heads * k_dim * v_dim + (c["linear_conv_kernel_dim"] - 1) * conv_dim)
        else:
            seen = min(context, c["sliding_window"]) if kind == "sliding_attention" else context
            kv += seen * 2 * c["num_key_value_heads"] * head_dim * 2
    return {"weights": weights, "kv_cache": kv, "recurrent_state": state,
            "total": weights + kv + state}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("model_dir")
    parser.add_argument("--context", type=int, default=640)
    parser.add_argument("--copy-gbps", type=float)
    parser.add_argument("--tok-s", type=float)
    args = parser.parse_args()
    b = step_bytes(args.model_dir, args.context)
    row = {k: round(v / 1e9, 4) for k, v in b.items()}
    row = {"model": args.model_dir, "context": args.context, **{f"{k}_gb": v for k, v in row.items()}}
    if args.copy_gbps:
        # The copy bandwidth counts a byte read and a byte written: a read-only stream moves at it.
        roofline = args.copy_gbps * 1e9 / b["total"]
        row["roofline_tok_s"] = round(roofline, 1)
        if args.tok_s:
            row["tok_s"] = args.tok_s
            row["fraction_of_roofline"] = round(args.tok_s / roofline, 3)
    print(json.dumps(row))


if __name__ == "__main__":
    main()
