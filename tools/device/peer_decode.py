#!/usr/bin/env python3
"""The decode peer: Hugging Face transformers, BF16, batch-1 greedy decode with a static KV cache,
on random weights of a real model's shape (no download: the config is written here). Run on the
device machine in the same call as Nibble's decode so that both numbers come from one GPU.

Prints one JSON line per model: prefill and decode times and decode tokens/s, where decode is
timed as generate(prompt, N new tokens) minus generate(prompt, 1 new token), after a warm-up
that lets transformers compile its static-cache decode step.

Usage: peer_decode.py [--models llama-3.1-8b,qwen3-30b-a3b] [--prompt-len 512] [--new-tokens 128]
"""
import argparse
import json
import pathlib
import time

import torch
import transformers


def config_for(name):
    # A model directory (nibble-make-model's output): its own config.json, key for key as the
    # public checkpoint's, without the quantization block (the peer runs BF16 weights).
    path = pathlib.Path(name)
    if (path / "config.json").is_file():
        values = json.loads((path / "config.json").read_text())
        values.pop("quantization_config", None)
        return transformers.AutoConfig.for_model(values.pop("model_type"), **values)
    if name == "llama-3.1-8b":
        return transformers.LlamaConfig(
            vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
            num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=131072,
            rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=False,
            rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                          "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})
    if name == "qwen3-30b-a3b":
        return transformers.Qwen3MoeConfig(
            vocab_size=151936, hidden_size=2048, intermediate_size=6144, moe_intermediate_size=768,
            num_hidden_layers=48, num_attention_heads=32, num_key_value_heads=4, head_dim=128,
            num_experts=128, num_experts_per_tok=8, norm_topk_prob=True,
            max_position_embeddings=40960, rms_norm_eps=1e-6, rope_theta=1000000.0,
            tie_word_embeddings=False)
    if name in ("qwen3-next-80b-a3b", "qwen3-next-80b-a3b-16l"):
        # The 16-layer cut: the first 16 of the 48 layers (12 linear, 4 full attention), which a
        # BF16 peer holds on one 80 GB GPU (make-model's preset of the same name).
        return transformers.Qwen3NextConfig(
            vocab_size=151936, hidden_size=2048, intermediate_size=5120,
            num_hidden_layers=16 if name.endswith("-16l") else 48, num_attention_heads=16,
            num_key_value_heads=2, head_dim=256, partial_rotary_factor=0.25,
            linear_conv_kernel_dim=4, linear_key_head_dim=128, linear_value_head_dim=128,
            linear_num_key_heads=16, linear_num_value_heads=32, full_attention_interval=4,
            num_experts=512, num_experts_per_tok=10, moe_intermediate_size=512,
            shared_expert_intermediate_size=512, norm_topk_prob=True, decoder_sparse_step=1,
            mlp_only_layers=[], max_position_embeddings=262144, rms_norm_eps=1e-6,
            rope_theta=10000000.0, tie_word_embeddings=False)
    raise SystemExit(f"unknown model {name}")


CACHE = {"implementation": "static"}


def timed_generate(model, prompt, new_tokens):
    torch.cuda.synchronize()
    start = time.perf_counter()
    try:
        out = model.generate(prompt, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                             do_sample=False, cache_implementation=CACHE["implementation"])
    except (ValueError, NotImplementedError, TypeError) as e:
        # A hybrid model (qwen3_next) keeps its own cache class: static is refused there.
        if CACHE["implementation"] is None:
            raise
        print(f"static cache refused ({e}); the model's own cache instead", flush=True)
        CACHE["implementation"] = None
        return timed_generate(model, prompt, new_tokens)
    torch.cuda.synchronize()
    assert out.shape[1] == prompt.shape[1] + new_tokens
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="llama-3.1-8b,qwen3-30b-a3b")
    parser.add_argument("--prompt-len", type=int, default=512)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    for name in args.models.split(","):
        CACHE["implementation"] = "static"
        torch.manual_seed(args.seed)
        config = config_for(name)
        start = time.perf_counter()
        with torch.device("cuda"):
            model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
        model.eval()
        model.generation_config.pad_token_id = 0
        load = time.perf_counter() - start
        prompt = torch.randint(0, config.vocab_size, (1, args.prompt_len), device="cuda")
        with torch.inference_mode():
            timed_generate(model, prompt, args.new_tokens)  # warm-up and compilation
            prefill = min(timed_generate(model, prompt, 1) for _ in range(3))
            total = min(timed_generate(model, prompt, args.new_tokens) for _ in range(2))
        decode = total - prefill
        print(json.dumps({
            "peer": "transformers", "version": transformers.__version__, "model": name,
            "dtype": "bf16", "gpu": torch.cuda.get_device_name(), "prompt_len": args.prompt_len,
            "cache": CACHE["implementation"] or "the model's own",
            "new_tokens": args.new_tokens, "init_s": round(load, 1),
            "prefill_ms": round(prefill * 1e3, 2),
            "decode_tok_s": round((args.new_tokens - 1) / decode, 1)}), flush=True)
        del model
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
