// The official OpenAI client (pinned in tests/oracle/npm) against nibble-controller's router.
// usage: node router_client_check.mjs BASE_URL MODEL
// The model has random weights, so checks compare the router's answers with each other:
// greedy decoding must give the same text streamed and not streamed, on any replica.
// Prints one line per check; exits non-zero on the first failure.
import OpenAI from "../oracle/npm/node_modules/openai/index.mjs";

const [baseURL, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0 });

let passed = 0;
function check(name, condition, detail) {
  if (!condition) {
    console.error(`FAIL ${name}: ${detail}`);
    process.exit(1);
  }
  passed += 1;
  console.log(`ok   ${name}`);
}

const models = await client.models.list();
check("models.list names the recipe's model", models.data.some((m) => m.id === model), JSON.stringify(models.data));

const request = { model, messages: [{ role: "user", content: "Say hello to the router." }], max_tokens: 12, temperature: 0 };
const first = await client.chat.completions.create(request);
const text = first.choices[0].message.content;
check("chat answer", typeof text === "string" && first.choices[0].message.role === "assistant", JSON.stringify(first));
check("chat usage", first.usage.completion_tokens >= 1 && first.usage.completion_tokens <= 12, JSON.stringify(first.usage));
check("chat model", first.model === model, first.model);

for (let i = 0; i < 4; i++) {
  const again = await client.chat.completions.create(request);
  check(`greedy answer ${i} identical`, again.choices[0].message.content === text, JSON.stringify([again.choices[0].message.content, text]));
}

const stream = await client.chat.completions.create({ ...request, stream: true, stream_options: { include_usage: true } });
let streamed = "";
let chunks = 0;
let usage = null;
for await (const chunk of stream) {
  chunks += 1;
  if (chunk.usage) usage = chunk.usage;
  for (const choice of chunk.choices) streamed += choice.delta?.content ?? "";
}
check("stream equals the non-streamed answer", streamed === text, JSON.stringify([streamed, text]));
check("stream came in several chunks", chunks >= 3, String(chunks));
check("stream usage", usage !== null && usage.completion_tokens === first.usage.completion_tokens, JSON.stringify(usage));

const completion = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 5, temperature: 0 });
check("completions", typeof completion.choices[0].text === "string" && completion.usage.completion_tokens >= 1, JSON.stringify(completion));

try {
  await client.chat.completions.create({ ...request, model: "no-such-model" });
  check("unknown model rejected", false, "request succeeded");
} catch (e) {
  check("unknown model is a 404", e.status === 404, `${e.status} ${e.message}`);
}
console.log(`${passed} passed, 0 failed`);
