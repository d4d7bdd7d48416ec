#!/usr/bin/env python3
"""An independent reference of an EAGLE-3 head's forward pass (vLLM's llama_eagle3.py: fc over
the target's three hidden states, one Llama layer whose q/k/v read
concat(input_layernorm(embedding), hidden_norm(h)) with h as the residual, the final norm,
lm_head over the draft vocabulary), in plain Python (no numpy), on a tiny head with weights from
a fixed formula. Writes eagle3_golden.json beside itself: the config, the weights, two steps'
inputs and the logits and pre-norm hidden states the head must produce. test_eagle3_head.cpp
runs the same head on the CPU backend and compares.

Run: python3 tests/spec/eagle3_reference.py   (rewrites tests/spec/eagle3_golden.json)
"""
import json
import math
import os

H, HEADS, KV_HEADS, D, I = 8, 2, 1, 4, 12  # hidden, query heads, KV heads, head_dim, MLP width
VOCAB, DRAFT_VOCAB, TARGET_H = 10, 6, 6  # the head's own embedding: target H differs from H
EPS, THETA = 1e-5, 10000.0


def values(name, n, scale):
    """Deterministic weights: a smooth, sign-changing function of the name and the index."""
    seed = sum((i + 1) * ord(c) for i, c in enumerate(name))
    return [round(scale * math.sin(0.7 * k + 0.013 * seed) * math.cos(0.31 * k + 0.5), 6)
            for k in range(n)]


def matrix(name, rows, cols):
    flat = values(name, rows * cols, 1.0 / math.sqrt(cols))
    return [flat[r * cols:(r + 1) * cols] for r in range(rows)]


def norm_weight(name):
    return [round(1.0 + 0.2 * v, 6) for v in values(name, H, 1.0)]


def linear(w, x):
    return [sum(a * b for a, b in zip(row, x)) for row in w]


def rms_norm(x, w):
    scale = 1.0 / math.sqrt(sum(v * v for v in x) / len(x) + EPS)
    return [v * scale * g for v, g in zip(x, w)]


def rope(vec, position):
    """Llama's rotate-half RoPE on one head: dimension i pairs with i + D/2."""
    half = D // 2
    out = list(vec)
    for i in range(half):
        angle = position / THETA ** (2 * i / D)
        c, s = math.cos(angle), math.sin(angle)
        a, b = vec[i], vec[i + half]
        out[i], out[i + half] = a * c - b * s, b * c + a * s
    return out


def silu(v):
    return v / (1.0 + math.exp(-v))


W = {
    "embed_tokens.weight": matrix("embed", VOCAB, H),
    "midlayer.input_layernorm.weight": norm_weight("input_norm"),
    "midlayer.hidden_norm.weight": norm_weight("hidden_norm"),
    "midlayer.post_attention_layernorm.weight": norm_weight("post_norm"),
    "midlayer.self_attn.q_proj.weight": matrix("q", HEADS * D, 2 * H),
    "midlayer.self_attn.k_proj.weight": matrix("k", KV_HEADS * D, 2 * H),
    "midlayer.self_attn.v_proj.weight": matrix("v", KV_HEADS * D, 2 * H),
    "midlayer.self_attn.o_proj.weight": matrix("o", H, HEADS * D),
    "midlayer.mlp.gate_proj.weight": matrix("gate", I, H),
    "midlayer.mlp.up_proj.weight": matrix("up", I, H),
    "midlayer.mlp.down_proj.weight": matrix("down", H, I),
    "fc.weight": matrix("fc", H, 3 * TARGET_H),
    "norm.weight": norm_weight("norm"),
    "lm_head.weight": matrix("lm_head", DRAFT_VOCAB, H),
}
D2T = [1, 2, 2, 3, 4, 4]  # draft id i is target id i + D2T[i]


class Head:
    def __init__(self):
        self.keys, self.values = [], []  # per position: [KV_HEADS][D]

    def step(self, tokens, start, hidden_in):
        logits, prenorm = [], []
        for j, token in enumerate(tokens):
            position = start + j
            h = hidden_in[j]
            x = linear(W["fc.weight"], h) if len(h) == 3 * TARGET_H else list(h)
            e = rms_norm(W["embed_tokens.weight"][token], W["midlayer.input_layernorm.weight"])
            attn_in = e + rms_norm(x, W["midlayer.hidden_norm.weight"])
            q = linear(W["midlayer.self_attn.q_proj.weight"], attn_in)
            k = linear(W["midlayer.self_attn.k_proj.weight"], attn_in)
            v = linear(W["midlayer.self_attn.v_proj.weight"], attn_in)
            k = [rope(k[g * D:(g + 1) * D], position) for g in range(KV_HEADS)]
            v = [v[g * D:(g + 1) * D] for g in range(KV_HEADS)]
            del self.keys[position:], self.values[position:]
            self.keys.append(k)
            self.values.append(v)
            out = []
            for hd in range(HEADS):
                g = hd // (HEADS // KV_HEADS)
                qh = rope(q[hd * D:(hd + 1) * D], position)
                scores = [sum(a * b for a, b in zip(qh, self.keys[p][g])) / math.sqrt(D)
                          for p in range(position + 1)]
                m = max(scores)
                weights = [math.exp(s - m) for s in scores]
                total = sum(weights)
                out += [sum(weights[p] * self.values[p][g][d] for p in range(position + 1)) / total
                        for d in range(D)]
            x = [a + b for a, b in zip(x, linear(W["midlayer.self_attn.o_proj.weight"], out))]
            hn = rms_norm(x, W["midlayer.post_attention_layernorm.weight"])
            act = [silu(g) * u for g, u in zip(linear(W["midlayer.mlp.gate_proj.weight"], hn),
                                               linear(W["midlayer.mlp.up_proj.weight"], hn))]
            x = [a + b for a, b in zip(x, linear(W["midlayer.mlp.down_proj.weight"], act))]
            prenorm.append(x)
            logits.append(linear(W["lm_head.weight"], rms_norm(x, W["norm.weight"])))
        return logits, prenorm


def main():
    head = Head()
    # Step 1: positions 0..3 read the target's three hidden states (fc); step 2: position 4
    # chains on the head's own output at position 3, as a second draft does.
    tokens1 = [3, 7, 1, 9]
    target_rows = [values("target_row_%d" % j, 3 * TARGET_H, 1.5) for j in range(len(tokens1))]
    logits1, prenorm1 = head.step(tokens1, 0, target_rows)
    tokens2 = [5]
    logits2, prenorm2 = head.step(tokens2, len(tokens1), [prenorm1[-1]])
    best = [max(range(DRAFT_VOCAB), key=row.__getitem__) for row in logits1 + logits2]
    golden = {
        "config": {
            "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama",
            "hidden_size": H, "intermediate_size": I, "num_attention_heads": HEADS,
            "num_key_value_heads": KV_HEADS, "head_dim": D, "num_hidden_layers": 1,
            "vocab_size": VOCAB, "draft_vocab_size": DRAFT_VOCAB,
            "target_hidden_size": TARGET_H, "rms_norm_eps": EPS, "rope_theta": THETA,
            "max_position_embeddings": 64, "tie_word_embeddings": False,
            "eagle_aux_hidden_state_layer_ids": [1, 3, 5],
        },
        "weights": {name: [v for row in w for v in row] if isinstance(w[0], list) else w
                    for name, w in W.items()},
        "d2t": D2T,
        "steps": [
            {"tokens": tokens1, "start": 0, "hidden_in": [v for r in target_rows for v in r],
             "logits": [v for r in logits1 for v in r],
             "hidden_out": [v for r in prenorm1 for v in r]},
            {"tokens": tokens2, "start": len(tokens1), "hidden_in": prenorm1[-1],
             "logits": [v for r in logits2 for v in r],
             "hidden_out": [v for r in prenorm2 for v in r]},
        ],
        "draft_target_ids": [b + D2T[b] for b in best],
    }
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "eagle3_golden.json")
    with open(path, "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
