#!/usr/bin/env python3
"""Model oracle: runs the tiny models in Hugging Face transformers and writes golden files.

usage (on a machine with torch + transformers): make_goldens.py MODELS_DIR OUT_DIR [NAME...]
MODELS_DIR comes from make_models.py. For each model in recipes.json (or only those named) and
each prompt: prefill, then `decode_steps` greedy steps with the KV cache, recording the argmax
and the top-k logits. Computed in float64 on the CPU so the golden values are more exact than
the engine under test. Fails if transformers reports missing or unexpected weights (a silently
random-initialized layer would make the goldens meaningless).

MXFP4 models (gpt_oss as shipped): transformers' own MXFP4 path wants a GPU and its kernels, and
dequantizes to BF16 without them, so this script writes MODELS_DIR/<name>-dense itself: each
*_blocks/*_scales pair dequantized by the OCP MX definition (E2M1 codes, element 2i in the low
nibble, times 2^(scale - 127)), exactly the values the engine computes with, as the [E, in, out]
float32 parameter transformers' GptOssExperts holds; every other tensor copied.
"""
import json
import pathlib
import shutil
import sys

import torch
import transformers
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM

E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def dequantize_mxfp4(blocks, scales):
    """[..., out, in/32, 16] U8 codes and [..., out, in/32] U8 exponents -> [..., in, out] f32."""
    lut = torch.tensor(E2M1, dtype=torch.float32)
    values = torch.stack([lut[(blocks & 0x0F).long()], lut[(blocks >> 4).long()]], dim=-1)
    values = values.reshape(*blocks.shape[:-1], 32)  # [..., out, groups, 32], low nibble first
    exponent = scales.to(torch.int32) - 127
    if (scales == 255).any():
        raise SystemExit("E8M0 scale 255 (NaN) in a generated model")
    values = torch.ldexp(values, exponent.unsqueeze(-1).to(torch.float32))
    values = values.reshape(*blocks.shape[:-2], blocks.shape[-2] * 32)  # [..., out, in]
    return values.transpose(-1, -2).contiguous()


def write_dense_copy(src, dst):
    """src: an MXFP4 checkpoint; dst: the same model with float32 experts, unquantized."""
    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir(parents=True)
    config = json.loads((src / "config.json").read_text())
    config.pop("quantization_config")
    (dst / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    for f in src.iterdir():
        if f.name.endswith(".json") and f.name not in ("config.json", "model.safetensors.index.json"):
            shutil.copy(f, dst / f.name)
    tensors = {}
    for f in sorted(src.glob("*.safetensors")):
        tensors.update(load_file(str(f)))
    out = {}
    for name, t in tensors.items():
        if name.endswith("_scales"):
            continue
        if name.endswith("_blocks"):
            base = name[: -len("_blocks")]
            out[base] = dequantize_mxfp4(t, tensors[base + "_scales"])
        else:
            out[name] = t
    save_file(out, str(dst / "model.safetensors"), metadata={"format": "pt"})


def load(path):
    model, info = AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.float64, attn_implementation="eager", output_loading_info=True)
    bad = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys",
                                                        "mismatched_keys")}
    if bad:
        raise SystemExit(f"{path}: transformers did not load every weight: {bad}")
    # transformers 5 runs MoE experts through grouped_mm by default, which has no float64;
    # the eager loop over experts is also the plainest reference.
    if hasattr(model, "set_experts_implementation"):
        model.set_experts_implementation("eager")
    return model.eval()


@torch.no_grad()
def greedy(model, prompt, steps, top_k):
    out = model(input_ids=torch.tensor([prompt]), use_cache=True)
    logits, past = out.logits[0, -1], out.past_key_values
    trace = []
    for step in range(steps + 1):
        values, ids = torch.topk(logits, top_k)
        token = int(torch.argmax(logits))
        trace.append({"token": token,
                      "top": [[int(i), float(v)] for i, v in zip(ids.tolist(), values.tolist())]})
        if step == steps:
            break
        # The position given outright: a sliding-window cache layer must not be asked for it.
        position = len(prompt) + step
        out = model(input_ids=torch.tensor([[token]]), past_key_values=past, use_cache=True,
                    cache_position=torch.tensor([position]),
                    position_ids=torch.tensor([[position]]))
        logits, past = out.logits[0, -1], out.past_key_values
    return trace


def main():
    models, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    recipes = json.loads((pathlib.Path(__file__).parent / "recipes.json").read_text())
    torch.set_num_threads(8)
    only = set(sys.argv[3:])
    for m in recipes["models"]:
        if only and m["name"] not in only:
            continue
        if m["dtype"] == "mxfp4":
            write_dense_copy(models / m["name"], models / (m["name"] + "-dense"))
        path = models / (m["name"] + ("-dense" if m["dtype"] in ("nvfp4", "mxfp4") else ""))
        model = load(path)
        golden = {"model": m, "transformers": transformers.__version__,
                  "torch": torch.__version__, "compute_dtype": "float64",
                  "decode_steps": recipes["decode_steps"], "top_k": recipes["top_k"],
                  "prompts": []}
        for prompt in recipes["prompts"]:
            golden["prompts"].append(
                {"prompt": prompt,
                 "steps": greedy(model, prompt, recipes["decode_steps"], recipes["top_k"])})
        (out / (m["name"] + ".json")).write_text(json.dumps(golden, indent=1) + "\n")
        print(m["name"], [p["steps"][0]["token"] for p in golden["prompts"]], flush=True)


if __name__ == "__main__":
    main()
