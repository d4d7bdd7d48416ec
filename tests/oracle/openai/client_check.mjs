// The official OpenAI client (pinned in tests/oracle/npm) against a Nibble server.
// usage: node client_check.mjs BASE_URL MODEL EXPECTATIONS_JSON
// EXPECTATIONS_JSON describes the server's model, e.g. for the byte-level fake model:
//   {"prompt": "a", "completion4": "bcde", "chat_prompt": "hi", "chat3": "\u000b\u000c\r"}
// Exits non-zero on the first failed check and prints one line per check.
import OpenAI from "../npm/node_modules/openai/index.mjs";
import { check, summary } from "./check.mjs";

const [baseURL, model, expectationsJson] = process.argv.slice(2);
const expect = JSON.parse(expectationsJson);
const client = new OpenAI({ baseURL, apiKey: process.env.NIBBLE_TEST_API_KEY ?? "unused" });

const models = await client.models.list();
check("models.list", models.data.some((m) => m.id === model), JSON.stringify(models.data));

const completion = await client.completions.create({ model, prompt: expect.prompt, max_tokens: 4, temperature: 0 });
check("completions text", completion.choices[0].text === expect.completion4, JSON.stringify(completion));
check("completions usage", completion.usage.completion_tokens === 4 && completion.usage.total_tokens === completion.usage.prompt_tokens + 4,
      JSON.stringify(completion.usage));
check("completions finish_reason", completion.choices[0].finish_reason === "length", completion.choices[0].finish_reason);

const chat = await client.chat.completions.create({
  model, messages: [{ role: "user", content: expect.chat_prompt }], max_tokens: 3, temperature: 0 });
check("chat content", chat.choices[0].message.content === expect.chat3, JSON.stringify(chat.choices[0]));
check("chat role", chat.choices[0].message.role === "assistant", chat.choices[0].message.role);
check("chat usage", chat.usage.completion_tokens === 3, JSON.stringify(chat.usage));

const stream = await client.chat.completions.create({
  model, messages: [{ role: "user", content: expect.chat_prompt }], max_tokens: 3, temperature: 0,
  stream: true, stream_options: { include_usage: true } });
let streamed = "";
let usage = null;
let finish = null;
for await (const chunk of stream) {
  if (chunk.usage) usage = chunk.usage;
  for (const choice of chunk.choices) {
    streamed += choice.delta?.content ?? "";
    if (choice.finish_reason) finish = choice.finish_reason;
  }
}
check("chat stream content", streamed === expect.chat3, JSON.stringify(streamed));
check("chat stream usage", usage && usage.completion_tokens === 3, JSON.stringify(usage));
check("chat stream finish_reason", finish === "length", finish);

const cstream = await client.completions.create({ model, prompt: expect.prompt, max_tokens: 4, temperature: 0, stream: true });
let ctext = "";
for await (const chunk of cstream) ctext += chunk.choices[0]?.text ?? "";
check("completions stream", ctext === expect.completion4, JSON.stringify(ctext));

const stopped = await client.completions.create({ model, prompt: expect.prompt, max_tokens: 10, temperature: 0,
                                                   stop: [expect.completion4.slice(2, 4)] });
check("stop string", stopped.choices[0].text === expect.completion4.slice(0, 2) && stopped.choices[0].finish_reason === "stop",
      JSON.stringify(stopped.choices[0]));

const seeded = { model, prompt: expect.prompt, max_tokens: 8, temperature: 1.5, seed: 7, n: 2 };
const a = await client.completions.create(seeded);
const b = await client.completions.create(seeded);
check("n choices", a.choices.length === 2, JSON.stringify(a.choices));
check("seeded determinism", JSON.stringify(a.choices.map((c) => c.text)) === JSON.stringify(b.choices.map((c) => c.text)),
      JSON.stringify([a.choices, b.choices]));

try {
  await client.completions.create({ model: "no-such-model", prompt: "x" });
  check("unknown model is an error", false, "no error thrown");
} catch (e) {
  check("unknown model is a 404", e.status === 404, `${e.status} ${e.message}`);
}
try {
  await client.completions.create({ model, prompt: expect.prompt, temperature: 7 });
  check("bad temperature is an error", false, "no error thrown");
} catch (e) {
  check("bad temperature is a 400", e.status === 400 && /temperature/.test(e.message), `${e.status} ${e.message}`);
}
summary();
