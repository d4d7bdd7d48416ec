// An agent's exchange through nibble-controller's router with the official `openai` client:
// tools offered -> a forced (named) tool call, streamed -> the tool's result sent back ->
// the answer, streamed. The model has random weights, so the call is forced by tool_choice
// and decoding is greedy; ajv (not ours) validates the call's arguments against the tool's
// parameter schema. Usage: node agent_exchange_check.mjs BASE_URL MODEL
// Prints one line per check and "N passed, M failed"; exits 1 if any failed.
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "../oracle/npm/package.json"));
const OpenAI = require("openai").default ?? require("openai");
const Ajv = require("ajv").default;

const [baseURL, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0 });
const ajv = new Ajv({ strict: false, allErrors: true });

let passed = 0, failed = 0;
function check(name, ok, detail) {
  if (ok) passed++; else failed++;
  console.log(`${ok ? "ok  " : "FAIL"} ${name}${ok ? "" : ": " + detail}`);
}

const weather = {
  type: "object",
  properties: {
    city: { type: "string", maxLength: 12 },
    unit: { enum: ["celsius", "fahrenheit"] },
    days: { type: "integer", minimum: 1, maximum: 7 },
  },
  required: ["city", "unit", "days"], additionalProperties: false,
};
const tools = [
  { type: "function", function: { name: "get_weather", description: "Weather forecast for a city",
      parameters: weather } },
  { type: "function", function: { name: "get_time", description: "Local time in a city",
      parameters: { type: "object", properties: { city: { type: "string", maxLength: 12 } },
        required: ["city"], additionalProperties: false } } },
];
const base = { model, temperature: 0, max_tokens: 96, tools };
const messages = [
  { role: "system", content: "You are a helpful assistant with tools." },
  { role: "user", content: "Will it rain in Paris this week?" },
];
const forced = { type: "function", function: { name: "get_weather" } };

// Reads a streamed answer: content, tool-call deltas in order, finish reason and usage.
async function read(stream) {
  const out = { content: "", deltas: [], finish: null, usage: null, chunks: 0 };
  for await (const chunk of stream) {
    out.chunks++;
    if (chunk.usage) out.usage = chunk.usage;
    for (const c of chunk.choices) {
      out.content += c.delta?.content ?? "";
      for (const t of c.delta?.tool_calls ?? []) out.deltas.push(t);
      if (c.finish_reason) out.finish = c.finish_reason;
    }
  }
  return out;
}

// 1. The forced tool call, streamed: name first (with id and type), then argument fragments.
const first = await read(await client.chat.completions.create({
  ...base, messages, tool_choice: forced, stream: true, stream_options: { include_usage: true },
}));
const head = first.deltas[0] ?? {};
check("call: first delta names the function with an id",
  head.index === 0 && head.type === "function" && head.function?.name === "get_weather" &&
  typeof head.id === "string" && head.id.length > 0, JSON.stringify(first.deltas.slice(0, 2)));
check("call: later deltas carry only argument fragments of call 0",
  first.deltas.slice(1).every((d) => d.index === 0 && !d.id && !d.function?.name &&
    typeof d.function?.arguments === "string"), JSON.stringify(first.deltas));
check("call: arguments came in several fragments", first.deltas.length >= 3,
  String(first.deltas.length));
check("call: no content beside the call", first.content === "", JSON.stringify(first.content));
// OpenAI ends an answer whose tool was named by tool_choice with "stop".
check("call: finish reason", first.finish === "stop", first.finish);
const argumentsText = first.deltas.map((d) => d.function?.arguments ?? "").join("");
let args = null;
try { args = JSON.parse(argumentsText); } catch {}
check("call: arguments validate against the tool's schema (ajv)",
  args !== null && ajv.validate(weather, args), `${argumentsText} ${JSON.stringify(ajv.errors)}`);

// The same request not streamed: the same call (greedy), as message.tool_calls.
const whole = await client.chat.completions.create({ ...base, messages, tool_choice: forced });
const call = whole.choices[0].message.tool_calls?.[0];
check("call: non-streamed answer is the same call",
  call?.function?.name === "get_weather" && call?.function?.arguments === argumentsText &&
  !whole.choices[0].message.content, JSON.stringify(whole.choices[0].message));

// 2. The tool's result goes back; the answer comes as content, streamed.
const result = { city: args?.city ?? "Paris", forecast: "rain on Thursday", days: args?.days ?? 1 };
const followUp = [
  ...messages,
  { role: "assistant", content: null,
    tool_calls: [{ id: head.id, type: "function",
      function: { name: "get_weather", arguments: argumentsText } }] },
  { role: "tool", tool_call_id: head.id, content: JSON.stringify(result) },
];
const answer = await read(await client.chat.completions.create({
  ...base, messages: followUp, tool_choice: "none", stream: true,
  stream_options: { include_usage: true },
}));
check("answer: content streamed in several chunks", answer.content.length > 0 && answer.chunks >= 3,
  `${answer.chunks} chunks, ${JSON.stringify(answer.content)}`);
check("answer: no tool call", answer.deltas.length === 0, JSON.stringify(answer.deltas));
check("answer: finish reason", answer.finish === "stop" || answer.finish === "length",
  answer.finish);
// The call and its result were rendered into the prompt: it grew by at least their text.
const grown = (answer.usage?.prompt_tokens ?? 0) - (first.usage?.prompt_tokens ?? 0);
check("answer: the call and the tool result reached the prompt",
  first.usage !== null && grown >= 10, `prompt grew by ${grown} tokens`);

// 3. The client's own tool loop (runTools) reads the same stream and calls the tool once with
// the parsed arguments (a named tool_choice ends the loop after that call).
let invoked = null;
// The same tools (so the same prompt and, greedy, the same call), each with its function.
const runnable = tools.map((t) => ({ type: "function", function: { ...t.function, parse: JSON.parse,
  function: (a) => { invoked = a; return JSON.stringify(result); } } }));
const runner = client.chat.completions.runTools({
  model, temperature: 0, max_tokens: 96, messages, tool_choice: forced, stream: true,
  tools: runnable,
}, { maxChatCompletions: 2 });
try {
  await runner.finalChatCompletion();
  check("runTools: the tool ran once with the streamed call's arguments",
    invoked !== null && JSON.stringify(invoked) === JSON.stringify(args),
    `${JSON.stringify(invoked)} vs ${JSON.stringify(args)}`);
} catch (e) { check("runTools", false, e.message); }

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
