// A whole agent exchange driven by the official OpenAI client's tool runner (runTools): it sends
// the question, runs the tool the model calls, sends the result back and reads the final answer;
// once whole and once streamed, with reasoning_effort. Streamed, the client's message snapshot
// keeps only the last delta of a field it does not know (reasoning_content), so the reasoning of
// each turn is read from the chunks, joined per completion id.
// usage: node harmony_agent_check.mjs BASE_URL MODEL EXPECTATIONS_JSON
//   EXPECTATIONS_JSON: {"name", "arguments", "result", "reasoning": [turn 1, turn 2], "answer"}
import OpenAI from "../npm/node_modules/openai/index.mjs";
import { check, summary } from "./check.mjs";

const [baseURL, model, expectationsJson] = process.argv.slice(2);
const expect = JSON.parse(expectationsJson);
const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0 });
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

for (const stream of [false, true]) {
  const how = stream ? "streamed" : "whole";
  const calls = [];
  const runner = client.chat.completions.runTools({
    model, stream, reasoning_effort: "low",
    messages: [{ role: "user", content: "Weather in Paris?" }],
    tools: [{
      type: "function",
      function: {
        name: expect.name, description: "Current weather",
        parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
        parse: JSON.parse,
        function: (args) => { calls.push(args); return expect.result; },
      },
    }],
  });
  const streamedReasoning = new Map();
  if (stream)
    runner.on("chunk", (chunk) => {
      const piece = chunk.choices?.[0]?.delta?.reasoning_content;
      if (piece) streamedReasoning.set(chunk.id, (streamedReasoning.get(chunk.id) ?? "") + piece);
    });
  const answer = await runner.finalContent();
  const messages = runner.messages;
  check(`${how}: the tool ran once with the model's arguments`,
        calls.length === 1 && same(calls[0], expect.arguments), JSON.stringify(calls));
  check(`${how}: final answer`, answer === expect.answer, JSON.stringify(answer));
  const roles = messages.map((m) => m.role);
  check(`${how}: user, assistant call, tool result, assistant answer`,
        same(roles, ["user", "assistant", "tool", "assistant"]), JSON.stringify(roles));
  const call = messages[1].tool_calls?.[0];
  check(`${how}: the call has an id and the tool result answers it`,
        call && call.id && messages[2].tool_call_id === call.id, JSON.stringify(messages.slice(1, 3)));
  check(`${how}: the tool result is what the tool returned`,
        same(JSON.parse(messages[2].content), expect.result), messages[2].content);
  const reasoning = stream ? [...streamedReasoning.values()]
                         : [messages[1].reasoning_content, messages[3].reasoning_content];
  check(`${how}: reasoning of each turn as reasoning_content`, same(reasoning, expect.reasoning),
        JSON.stringify(reasoning));
  const final = await runner.finalChatCompletion();
  check(`${how}: finish_reason stop`, final.choices[0].finish_reason === "stop", final.choices[0].finish_reason);
}
summary();
