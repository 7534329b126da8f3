// The clients users point at an OpenAI-compatible base URL, run against a
// Burst server: the newest `openai` package, LangChain's ChatOpenAI
// (`@langchain/openai`: invoke, stream, batch) and the AI SDK's
// OpenAI-compatible provider (`ai` + `@ai-sdk/openai-compatible`:
// generateText, streamText). Each part records what it saw, or its error.
// Usage: OPENAI_BASE_URL=http://HOST:PORT/v1 OPENAI_API_KEY=KEY node clients_flow.mjs MODEL
// Prints one JSON object; exits non-zero only if the script itself breaks.
import OpenAI from "openai-latest";
import { ChatOpenAI } from "@langchain/openai";
import { generateText, streamText } from "ai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";

const baseURL = process.env.OPENAI_BASE_URL;
const apiKey = process.env.OPENAI_API_KEY;
const model = process.argv[2];
const question = "My order has not arrived. Where is it?";
const out = {};

async function part(name, fn) {
  try {
    out[name] = await fn();
  } catch (e) {
    out[name] = { error: String(e?.message ?? e), status: e?.status ?? null };
  }
}

await part("openai", async () => {
  const client = new OpenAI({ baseURL, apiKey });
  const messages = [{ role: "user", content: question }];
  const chat = await client.chat.completions.create({ model, messages, max_tokens: 8, temperature: 0,
                                                      logprobs: true, top_logprobs: 2 });
  const stream = await client.chat.completions.create({ model, messages, max_tokens: 8, temperature: 0, stream: true,
                                                        stream_options: { include_usage: true } });
  let streamed = "";
  let usage = null;
  for await (const chunk of stream) {
    streamed += chunk.choices[0]?.delta?.content ?? "";
    if (chunk.usage) usage = chunk.usage;
  }
  const scored = await client.completions.create({ model, prompt: "A cat is", max_tokens: 1, temperature: 0,
                                                   logprobs: 1, echo: true });
  const listed = [];
  for await (const m of client.models.list()) listed.push(m.id);
  const one = await client.models.retrieve(model);
  return {
    content: chat.choices[0].message.content,
    logprobs: chat.choices[0].logprobs?.content?.length ?? 0,
    top_logprobs: chat.choices[0].logprobs?.content?.[0]?.top_logprobs?.length ?? 0,
    usage: chat.usage,
    streamed,
    stream_usage: usage,
    echo_text: scored.choices[0].text,
    echo_tokens: scored.choices[0].logprobs.tokens.length,
    echo_first: scored.choices[0].logprobs.token_logprobs[0],
    models: listed,
    retrieved: one.id,
  };
});

await part("langchain", async () => {
  const llm = new ChatOpenAI({ model, apiKey, temperature: 0, maxTokens: 8, configuration: { baseURL } });
  const plain = await llm.invoke(question);
  let streamed = "";
  let chunks = 0;
  for await (const chunk of await llm.stream(question)) {
    chunks += 1;
    streamed += chunk.content;
  }
  const batch = await llm.batch([question, "I was charged twice this month."]);
  return {
    content: plain.content,
    usage: plain.usage_metadata ?? null,
    streamed,
    chunks,
    batch: batch.map((m) => m.content),
  };
});

await part("ai_sdk", async () => {
  const burst = createOpenAICompatible({ name: "burst", baseURL, apiKey, includeUsage: true });
  const plain = await generateText({ model: burst(model), prompt: question, temperature: 0, maxOutputTokens: 8 });
  const result = streamText({ model: burst(model), prompt: question, temperature: 0, maxOutputTokens: 8 });
  let streamed = "";
  for await (const delta of result.textStream) streamed += delta;
  const usage = await result.usage;
  return { content: plain.text, usage: plain.usage, streamed, stream_usage: usage };
});

console.log(JSON.stringify(out));
