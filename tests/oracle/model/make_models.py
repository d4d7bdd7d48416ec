#!/usr/bin/env python3
"""Builds the oracle's tiny models (recipes.json) with our tools.

usage: make_models.py BUILD_DIR OUT_DIR
Writes OUT_DIR/<name> (what our engine loads) and, for NVFP4, OUT_DIR/<name>-dense
(nibble-quantize --dequantize --dtype f32: exactly the values our engine computes with),
which is what transformers loads in make_goldens.py. MXFP4 models (gpt_oss) are dequantized by
make_goldens.py itself, independently of our code.
"""
import json
import pathlib
import subprocess
import sys


def main():
    build, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    recipes = json.loads((pathlib.Path(__file__).parent / "recipes.json").read_text())
    make = build / "tools/make-model/nibble-make-model"
    quantize = build / "tools/quantize/nibble-quantize"
    for m in recipes["models"]:
        target = out / m["name"]
        cmd = [str(make), "--arch", m["arch"], "--preset", m.get("preset", "tiny"),
               "--seed", str(m["seed"]),
               "--dtype", m["dtype"], "--no-tokenizer", "--force", "--output", str(target)]
        if "format" in m:
            cmd += ["--format", m["format"]]
        subprocess.run(cmd, check=True)
        if m["dtype"] == "nvfp4":
            subprocess.run([str(quantize), "--input", str(target), "--output",
                            str(out / (m["name"] + "-dense")), "--dequantize", "--dtype", "f32"],
                           check=True)


if __name__ == "__main__":
    main()
