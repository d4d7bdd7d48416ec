#!/usr/bin/env python3
"""Oracle for nibble's chat templates: renders every conversation in conversations.json with
every model's chat template using Python jinja2, configured the way transformers'
apply_chat_template configures it (facts taken from transformers' chat_template_utils):

  * jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with the
    jinja2.ext.loopcontrols extension (transformers also adds its own {% generation %} tag, which
    renders its body; none of these templates use it);
  * filter tojson = json.dumps(x, ensure_ascii=False, indent=indent, separators=separators,
    sort_keys=sort_keys), parameters in that order after the value, all defaulting to
    False/None/None/False;
  * globals raise_exception(message) (raises jinja2.exceptions.TemplateError) and
    strftime_now(format) (datetime.now().strftime(format));
  * render variables: messages, tools (None if absent), documents (None), add_generation_prompt,
    then the tokenizer's special tokens map (bos_token, eos_token, unk_token, sep_token,
    pad_token, cls_token, mask_token: only those set; AddedToken objects by their content),
    then the caller's extra kwargs.
  * a chat_template given as a list of {name, template} uses the entry named "default".

Usage: render_jinja2.py CONVERSATIONS_JSON LABEL=MODEL_DIR... > results.json
Output: {"<label>": {"<conversation name>": {"prompt": str} | {"error": str}}}
or {"<model>": {"no_template": str}} when the tokenizer_config.json has no chat_template.
"""
import json
import os
import sys
from datetime import datetime

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

SPECIAL_TOKENS = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
                  "mask_token"]


def make_environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def load_config(model_dir):
    with open(os.path.join(model_dir, "tokenizer_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    template = config.get("chat_template")
    # Newer Hugging Face repos keep the template in chat_template.jinja; transformers prefers it.
    jinja_path = os.path.join(model_dir, "chat_template.jinja")
    if os.path.exists(jinja_path):
        with open(jinja_path, encoding="utf-8") as f:
            template = f.read()
    if isinstance(template, list):
        template = next((t["template"] for t in template if t["name"] == "default"), None)
    special = {}
    for name in SPECIAL_TOKENS:
        value = config.get(name)
        if isinstance(value, dict):
            value = value.get("content")
        if value is not None:
            special[name] = value
    return template, special


def render(env, template, special, request):
    request = dict(request)
    variables = {
        "messages": request.pop("messages"),
        "tools": request.pop("tools", None),
        "documents": None,
        "add_generation_prompt": request.pop("add_generation_prompt", False),
    }
    variables.update(special)
    variables.update(request)
    return env.from_string(template).render(**variables)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    with open(sys.argv[1], encoding="utf-8") as f:
        conversations = json.load(f)
    env = make_environment()
    results = {}
    for arg in sys.argv[2:]:
        name, _, model_dir = arg.partition("=")
        template, special = load_config(model_dir)
        if template is None:
            results[name] = {"no_template": "tokenizer_config.json has no chat_template"}
            continue
        per_model = {}
        for conv in conversations:
            try:
                per_model[conv["name"]] = {"prompt": render(env, template, special, conv["request"])}
            except Exception as e:  # any failure counts: ours must fail on the same pairs
                per_model[conv["name"]] = {"error": f"{type(e).__name__}: {e}"}
        results[name] = per_model
    json.dump(results, sys.stdout, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
