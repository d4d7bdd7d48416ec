#!/usr/bin/env python3
"""A projection, not a measurement: Qwen3-Next-80B-A3B NVFP4 batch-1 decode on a DGX Spark (GB10,
273 GB/s) with speculative decoding by its own MTP module, from the bytes a step reads and the
overheads measured on an H100 (docs/performance.md, "GB10 projection" and "Speculative decoding").

A decode step reads the non-routed weights, the top_k routed experts of every layer and the BF16
lm_head (its bytes at the bandwidth, plus the fixed cost per step the 16-layer cut measured). A
verify step of t = k + 1 tokens reads the same non-routed weights once but the union of the
experts its tokens pick: between top_k (every token picks the same ones) and
E(1 - (1 - top_k / E)^t) (independent picks), the two routing bounds below; it also writes t
recurrent states per linear-attention layer, where decoding writes one, for the rollback. Each
MTP draft token runs the module (fc, one attention layer with its MoE) and the shared lm_head.
Expected tokens per step with k chained drafts each accepted with probability a, given the one
before: (1 - a^(k + 1)) / (1 - a).

The "today" columns add what the H100 measured on top of the bytes in a verify step
(nibble-spec-bench, Llama-3.1-8B, 2026-12-07 08:27): eager launches (a verify step of 5 tokens
with none accepted cost 1.79 ms more than a graphed decode step) and the host's sampling of each
accepted row (0.61 ms a row); the "graphs" columns drop both, as wip/spec-cuda is predicted to.
MTP does not run on the CUDA backend yet: every column is what it would give once it does.

Usage: mtp_spark.py [--accept 0.65,0.8,0.91] [--ks 1,2,3]
"""
import argparse

# The 80B's shapes (config.json of Qwen/Qwen3-Next-80B-A3B-Instruct) and NVFP4's bytes a weight
# (4 bits plus one FP8 scale per 16).
HIDDEN, MOE_INTER, EXPERTS, TOP_K, LAYERS, LINEAR_LAYERS = 2048, 512, 512, 10, 48, 36
NVFP4 = 0.5 + 1 / 16
STATE_MB = 32 * 128 * 128 * 4 / 1e6  # one linear layer's delta-rule state, FP32


def expert_mb():
    return 3 * HIDDEN * MOE_INTER * NVFP4 / 1e6


def distinct_experts(tokens, independent):
    if not independent:
        return TOP_K
    return EXPERTS * (1 - (1 - TOP_K / EXPERTS) ** tokens)


def tokens_per_step(k, a):
    return k + 1 if a >= 1 else (1 - a ** (k + 1)) / (1 - a)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--accept", default="0.65,0.8,0.91", help="per-position acceptance a")
    p.add_argument("--ks", default="1,2,3", help="MTP drafts per step")
    p.add_argument("--bandwidth-gbps", type=float, default=273.0)
    p.add_argument("--layer-mb", type=float, default=43.3, help="a decode step's bytes a layer")
    p.add_argument("--lm-head-gb", type=float, default=0.622)
    p.add_argument("--fixed-ms", type=float, default=4.8, help="a decode step's time beyond bytes")
    p.add_argument("--mtp-extra-mb", type=float, default=2 * HIDDEN * HIDDEN * 2 / 1e6,
                   help="the module's fc (2H -> H, BF16) beside its one layer")
    p.add_argument("--eager-ms", type=float, default=1.79, help="eager verify's cost over a step")
    p.add_argument("--host-row-ms", type=float, default=0.61, help="host sampling, per kept row")
    a = p.parse_args()
    accepts = [float(x) for x in a.accept.split(",")]
    ks = [int(x) for x in a.ks.split(",")]
    gbps = a.bandwidth_gbps

    experts_gb = LAYERS * TOP_K * expert_mb() / 1e3
    step_gb = LAYERS * a.layer_mb / 1e3 + a.lm_head_gb
    rest_gb = step_gb - experts_gb
    decode_ms = step_gb / gbps * 1e3 + a.fixed_ms
    layer_fixed_ms = a.fixed_ms / LAYERS
    draft_ms = ((a.layer_mb + a.mtp_extra_mb) / 1e3 + a.lm_head_gb) / gbps * 1e3 + layer_fixed_ms
    print(f"decode step: {step_gb:.2f} GB ({experts_gb:.3f} GB routed experts), "
          f"{decode_ms:.1f} ms, {1e3 / decode_ms:.1f} tok/s; an MTP draft token {draft_ms:.2f} ms")
    print(f"{'k':>2} {'a':>5} {'tok/step':>8} | {'routing':>11} {'verify GB':>9} {'step ms':>8} |"
          f" {'today tok/s':>11} {'x':>5} | {'graphs tok/s':>12} {'x':>5}")
    for k in ks:
        t = k + 1
        for independent in (False, True):
            experts = experts_gb * distinct_experts(t, independent) / TOP_K
            states_gb = LINEAR_LAYERS * STATE_MB * (t - 1) / 1e3
            verify_gb = rest_gb + experts + states_gb
            step_ms = verify_gb / gbps * 1e3 + a.fixed_ms + k * draft_ms
            for acc in accepts:
                e = tokens_per_step(k, acc)
                today_ms = step_ms + a.eager_ms + a.host_row_ms * (e - 1)
                print(f"{k:>2} {acc:>5.2f} {e:>8.2f} | {'independent' if independent else 'shared':>11}"
                      f" {verify_gb:>9.2f} {step_ms:>8.1f} | {e / today_ms * 1e3:>11.1f}"
                      f" {e / today_ms * decode_ms:>5.2f} | {e / step_ms * 1e3:>12.1f}"
                      f" {e / step_ms * decode_ms:>5.2f}")


if __name__ == "__main__":
    main()
