// The official OpenAI client's tool-call handling against a Nibble server whose model answers
// with one tool call (the scripted fake model of tests/server/test_openai_npm_client.cpp).
// usage: node tool_call_check.mjs BASE_URL MODEL EXPECTATIONS_JSON
//   EXPECTATIONS_JSON: {"name": "get_weather", "arguments": {...}, "content": "text before it"}
// Exits non-zero on the first failed check and prints one line per check.
import OpenAI from "../npm/node_modules/openai/index.mjs";
import { check, summary } from "./check.mjs";

const [baseURL, model, expectationsJson] = process.argv.slice(2);
const expect = JSON.parse(expectationsJson);
const client = new OpenAI({ baseURL, apiKey: "unused" });

const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

const tools = [{
  type: "function",
  function: {
    name: expect.name, description: "Current weather", strict: true,
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"],
                  additionalProperties: false },
  },
}];
const messages = [{ role: "user", content: "Weather in Paris?" }];

const plain = await client.chat.completions.create({ model, messages, tools });
const call = plain.choices[0].message.tool_calls?.[0];
check("create: tool call", call && call.type === "function" && call.function.name === expect.name &&
      same(JSON.parse(call.function.arguments), expect.arguments), JSON.stringify(plain.choices[0]));
check("create: finish_reason", plain.choices[0].finish_reason === "tool_calls", plain.choices[0].finish_reason);
check("create: content", plain.choices[0].message.content === expect.content, plain.choices[0].message.content);

// The streaming helper assembles the deltas itself and rejects malformed ones.
let argumentDeltas = 0;
const runner = client.chat.completions.stream({ model, messages, tools })
  .on("tool_calls.function.arguments.delta", () => { argumentDeltas += 1; });
const final = await runner.finalChatCompletion();
const streamed = final.choices[0].message;
check("stream helper: tool call", streamed.tool_calls?.length === 1 &&
      streamed.tool_calls[0].function.name === expect.name &&
      same(JSON.parse(streamed.tool_calls[0].function.arguments), expect.arguments),
      JSON.stringify(streamed));
check("stream helper: parsed arguments", same(streamed.tool_calls[0].function.parsed_arguments, expect.arguments),
      JSON.stringify(streamed.tool_calls[0]));
check("stream helper: argument deltas", argumentDeltas >= 1, String(argumentDeltas));
check("stream helper: content", (streamed.content ?? "") === expect.content, JSON.stringify(streamed.content));
check("stream helper: finish_reason", final.choices[0].finish_reason === "tool_calls", final.choices[0].finish_reason);

// parse() turns strict tools' arguments into objects.
const parsed = await client.chat.completions.parse({ model, messages, tools });
check("parse: parsed_arguments", same(parsed.choices[0].message.tool_calls[0].function.parsed_arguments, expect.arguments),
      JSON.stringify(parsed.choices[0].message));

// The tool result goes back as role "tool" and the next request is accepted.
const followUp = await client.chat.completions.create({
  model, tools, max_tokens: 1,
  messages: [...messages, plain.choices[0].message,
             { role: "tool", tool_call_id: call.id, content: "sunny, 21" }] });
check("tool result accepted", followUp.choices.length === 1, JSON.stringify(followUp));
summary();
