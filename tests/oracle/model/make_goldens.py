#!/usr/bin/env python3
"""Model oracle: runs the tiny models in Hugging Face transformers and writes golden files.

usage (on a machine with torch + transformers): make_goldens.py MODELS_DIR OUT_DIR
MODELS_DIR comes from make_models.py. For each model in recipes.json and each prompt: prefill,
then `decode_steps` greedy steps with the KV cache, recording the argmax and the top-k logits.
Computed in float64 on the CPU so the golden values are more exact than the engine under test.
Fails if transformers reports missing or unexpected weights (a silently random-initialized
layer would make the goldens meaningless).
"""
import json
import pathlib
import sys

import torch
import transformers
from transformers import AutoModelForCausalLM


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
        out = model(input_ids=torch.tensor([[token]]), past_key_values=past, use_cache=True)
        logits, past = out.logits[0, -1], out.past_key_values
    return trace


def main():
    models, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    recipes = json.loads((pathlib.Path(__file__).parent / "recipes.json").read_text())
    torch.set_num_threads(8)
    for m in recipes["models"]:
        path = models / (m["name"] + ("-dense" if m["dtype"] == "nvfp4" else ""))
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
