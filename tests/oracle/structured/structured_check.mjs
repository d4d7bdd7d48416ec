// Oracle for structured outputs: sends constrained requests to a Nibble server with the
// official `openai` client and validates every answer with ajv (a JSON Schema validator that
// is not ours). Usage: node structured_check.mjs BASE_URL MODEL
// Prints one line per check and "N passed, M failed"; exits 1 if any failed.
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "../npm/package.json"));
const OpenAI = require("openai").default ?? require("openai");
const Ajv = require("ajv").default;
const addFormats = require("ajv-formats").default;

const [baseURL, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0 });
const ajv = new Ajv({ strict: false, allErrors: true });
addFormats(ajv);

let passed = 0, failed = 0;
function check(name, ok, detail) {
  if (ok) passed++; else failed++;
  console.log(`${ok ? "ok  " : "FAIL"} ${name}${ok ? "" : ": " + detail}`);
}

// Schemas written for this test: strings are length-bounded and the person's age is a bounded
// integer so that a random-weight model finishes well within max_tokens (an unbounded integer
// may take digits until the limit: seen with seed 2 once sampling drew from its own Philox
// stream); every other construct the grammar supports appears once.
const shortText = { type: "string", maxLength: 12 };
const corpus = {
  person: {
    type: "object",
    properties: {
      name: shortText, age: { type: "integer", minimum: 0, maximum: 150 }, member: { type: "boolean" },
    },
    required: ["name", "age", "member"], additionalProperties: false,
  },
  enums_and_const: {
    type: "object",
    properties: {
      color: { enum: ["red", "green", "blue"] }, version: { const: 2 },
      size: { type: ["integer", "null"] },
    },
    required: ["color", "version", "size"], additionalProperties: false,
  },
  bounded_array: {
    type: "array", items: { enum: [1, 2, 3, "x"] }, minItems: 2, maxItems: 4,
  },
  any_of: {
    type: "object",
    properties: {
      value: { anyOf: [{ type: "number" }, { type: "string", maxLength: 5 }, { type: "null" }] },
    },
    required: ["value"], additionalProperties: false,
  },
  recursive_tree: {
    $defs: {
      node: {
        type: "object",
        properties: {
          id: { type: "integer" },
          children: { type: "array", items: { $ref: "#/$defs/node" }, maxItems: 2 },
        },
        required: ["id", "children"], additionalProperties: false,
      },
    },
    $ref: "#/$defs/node",
  },
  formats: {
    type: "object",
    properties: {
      day: { type: "string", format: "date" }, id: { type: "string", format: "uuid" },
      ip: { type: "string", format: "ipv4" }, code: { type: "string", pattern: "^[A-Z]{3}-\\d{2}$" },
    },
    required: ["day", "id", "ip", "code"], additionalProperties: false,
  },
  numeric_bounds: {
    type: "object",
    properties: {
      percent: { type: "number", minimum: 0, maximum: 100 },
      level: { type: "integer", exclusiveMinimum: -3, maximum: 12 },
      kelvin: { type: "number", exclusiveMinimum: -273.15, exclusiveMaximum: 1000.5 },
      count: { type: "integer", minimum: 1000, maximum: 1005 },
      step: { type: "integer", multipleOf: 5, minimum: -50, maximum: 50 },
    },
    required: ["percent", "level", "kelvin", "count", "step"], additionalProperties: false,
  },
  optional_members: {
    type: "object",
    properties: { a: { type: "boolean" }, b: { type: "null" }, c: { enum: ["x", "y"] } },
    required: ["b"],
  },
};

const messages = [{ role: "user", content: "Answer in JSON." }];
const base = { model, max_tokens: 400, temperature: 1, seed: 7 };

for (const [name, schema] of Object.entries(corpus)) {
  const validate = ajv.compile(schema);
  for (const seed of [1, 2]) {
    const label = `json_schema ${name} seed ${seed}`;
    try {
      const r = await client.chat.completions.create({
        ...base, seed, messages, max_tokens: name === "recursive_tree" ? 120 : base.max_tokens,
        response_format: { type: "json_schema", json_schema: { name, schema, strict: true } },
      });
      const choice = r.choices[0];
      let value, parsed = true;
      try { value = JSON.parse(choice.message.content); } catch { parsed = false; }
      // Recursion depth has no bound in the grammar: a random model may still be nesting when
      // max_tokens ends the answer; an answer that stopped must be valid.
      const cut = name === "recursive_tree" && choice.finish_reason === "length";
      check(label, cut || (choice.finish_reason === "stop" && parsed && validate(value)),
        `finish ${choice.finish_reason}, content ${JSON.stringify(choice.message.content)}, ` +
        `errors ${JSON.stringify(validate.errors)}`);
    } catch (e) { check(label, false, e.message); }
  }
}

// chat.completions.parse: the client parses the JSON itself.
{
  const schema = corpus.person;
  try {
    const r = await client.chat.completions.parse({
      ...base, messages,
      response_format: { type: "json_schema", json_schema: { name: "person", schema, strict: true } },
    });
    const parsed = r.choices[0].message.parsed;
    check("chat.completions.parse", parsed !== null && ajv.validate(schema, parsed),
      JSON.stringify(r.choices[0].message));
  } catch (e) { check("chat.completions.parse", false, e.message); }
}

// json_object: any JSON object (streamed, n = 2).
try {
  const stream = await client.chat.completions.create({
    ...base, messages, n: 2, stream: true, response_format: { type: "json_object" },
    max_tokens: 150,
  });
  const text = ["", ""], finish = ["", ""];
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      text[c.index] += c.delta?.content ?? "";
      if (c.finish_reason) finish[c.index] = c.finish_reason;
    }
  }
  for (let i = 0; i < 2; i++) {
    let ok = false;
    try { const v = JSON.parse(text[i]); ok = typeof v === "object" && v !== null && !Array.isArray(v); } catch {}
    // A length cut-off is allowed here (any JSON object may be deep); a stop must be valid.
    check(`json_object stream choice ${i}`, finish[i] === "length" || (finish[i] === "stop" && ok),
      `finish ${finish[i]}, text ${JSON.stringify(text[i])}`);
  }
} catch (e) { check("json_object stream", false, e.message); }

// vLLM's fields, on both endpoints (the client passes unknown fields through).
const regex = "(yes|no), [0-9]{1,3} (apples|pears)";
for (const [label, extra, test] of [
  ["guided_regex", { guided_regex: regex }, (t) => new RegExp(`^(${regex})$`).test(t)],
  ["guided_choice", { guided_choice: ["alpha", "beta", "gamma δ"] }, (t) => ["alpha", "beta", "gamma δ"].includes(t)],
  ["structured_outputs.regex", { structured_outputs: { regex: "[a-f]{4}" } }, (t) => /^[a-f]{4}$/.test(t)],
  ["structured_outputs.choice", { structured_outputs: { choice: ["x", "yy"] } }, (t) => ["x", "yy"].includes(t)],
]) {
  try {
    const chat = await client.chat.completions.create({ ...base, messages, ...extra });
    const text = chat.choices[0].message.content;
    check(`${label} chat`, chat.choices[0].finish_reason === "stop" && test(text), JSON.stringify(text));
    const done = await client.completions.create({ ...base, prompt: "Say:", ...extra });
    check(`${label} completions`, done.choices[0].finish_reason === "stop" && test(done.choices[0].text),
      JSON.stringify(done.choices[0].text));
  } catch (e) { check(label, false, e.message); }
}
{
  const schema = corpus.enums_and_const;
  const validate = ajv.compile(schema);
  const r = await client.completions.create({ ...base, prompt: "{", guided_json: schema });
  let ok = false;
  try { ok = validate(JSON.parse(r.choices[0].text)); } catch {}
  check("guided_json completions", r.choices[0].finish_reason === "stop" && ok, r.choices[0].text);
}

// tool_choice "required" over several tools (parallel calls allowed) and a named function: the
// constrained output (vLLM's forced shapes) comes back as tool_calls that name an offered tool
// with valid arguments, and no content.
const tools = [
  { type: "function", function: { name: "get_weather", parameters: {
      type: "object", properties: { city: shortText, unit: { enum: ["C", "F"] } },
      required: ["city", "unit"], additionalProperties: false } } },
  { type: "function", function: { name: "add", parameters: {
      type: "object", properties: { a: { type: "integer" }, b: { type: "integer" } },
      required: ["a", "b"], additionalProperties: false } } },
  { type: "function", function: { name: "now", parameters: {
      type: "object", properties: {}, additionalProperties: false } } },
];
for (const [label, tool_choice, parallel] of [
  ["tool_choice required", "required", true],
  ["tool_choice required, one call", "required", false],
  ["tool_choice named", { type: "function", function: { name: "add" } }, true],
]) {
  for (const seed of [3, 4]) {
    try {
      const r = await client.chat.completions.create({
        ...base, seed, messages: [{ role: "user", content: "Use a tool." }], tools, tool_choice,
        parallel_tool_calls: parallel,
      });
      const m = r.choices[0].message;
      const calls = (m.tool_calls ?? []).map((c) => ({ name: c.function.name, arguments: JSON.parse(c.function.arguments) }));
      // OpenAI ends a named choice with "stop", a required one with "tool_calls".
      const reason = typeof tool_choice === "object" ? "stop" : "tool_calls";
      // Neither the number of parallel calls nor an integer's digits have a bound in the
      // grammar: a random model may still be writing when max_tokens ends the answer, which then
      // comes back unparsed as content in the forced shape; an answer that stopped must be valid.
      const cut = r.choices[0].finish_reason === "length" && !m.tool_calls?.length &&
        (m.content ?? "").startsWith(typeof tool_choice === "object" ? "{" : '[{"name": "');
      const ok = cut || !m.content && r.choices[0].finish_reason === reason && calls.length >= 1 && (parallel || calls.length === 1) && calls.every((c) => {
        const tool = tools.find((t) => t.function.name === c.name);
        if (!tool) return false;
        if (typeof tool_choice === "object" && c.name !== "add") return false;
        return ajv.validate(tool.function.parameters, c.arguments);
      });
      check(`${label} seed ${seed}`, ok, JSON.stringify(m));
    } catch (e) { check(`${label} seed ${seed}`, false, e.message); }
  }
}

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
