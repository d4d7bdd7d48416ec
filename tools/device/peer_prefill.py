#!/usr/bin/env python3
"""The prefill peer: Hugging Face transformers, BF16, sdpa attention, one forward over a random
prompt (logits_to_keep=1), on random weights of a real model's shape (configs from
peer_decode.py). Run on the device machine in the same call as Nibble's prefill so that both
numbers come from one GPU.

Prints one JSON line per (model, prompt length): the best of three forwards after a warm-up.

Usage: peer_prefill.py [--models llama-3.1-8b] [--lengths 512,2048,8192,32768]
"""
import argparse
import json
import time

import torch
import transformers

from peer_decode import config_for


def timed_forward(model, prompt):
    torch.cuda.synchronize()
    start = time.perf_counter()
    model(prompt, logits_to_keep=1, use_cache=False)
    torch.cuda.synchronize()
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="llama-3.1-8b")
    parser.add_argument("--lengths", default="512,2048,8192,32768")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    for name in args.models.split(","):
        torch.manual_seed(args.seed)
        config = config_for(name)
        with torch.device("cuda"):
            try:
                config._attn_implementation = "sdpa"
                model = transformers.AutoModelForCausalLM.from_config(
                    config, dtype=torch.bfloat16, attn_implementation="sdpa")
            except ValueError as e:  # gpt_oss: sinks need its eager attention
                print(f"sdpa refused ({e}); eager attention instead", flush=True)
                config._attn_implementation = "eager"
                model = transformers.AutoModelForCausalLM.from_config(
                    config, dtype=torch.bfloat16, attn_implementation="eager")
        model.eval()
        for length in (int(x) for x in args.lengths.split(",")):
            prompt = torch.randint(0, config.vocab_size, (1, length), device="cuda")
            with torch.inference_mode():
                timed_forward(model, prompt)  # warm-up
                best = min(timed_forward(model, prompt) for _ in range(3))
            print(json.dumps({
                "peer": "transformers", "version": transformers.__version__, "model": name,
                "dtype": "bf16", "attention": config._attn_implementation, "gpu": torch.cuda.get_device_name(),
                "prompt_len": length, "prefill_ms": round(best * 1e3, 2),
                "prefill_tok_s": round(length / best, 1)}), flush=True)
        del model
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
