// Runs a GGUF file in llama.cpp itself (node-llama-cpp's prebuilt CPU
// binary; nothing is downloaded or built): tokenizes each prompt, puts the
// bos token first where the file says to, and decodes greedily.
// Usage: node llama_cpp_run.mjs FILE.gguf MAX_TOKENS PROMPT...
// Prints one JSON object: {"runs": [{"prompt_token_ids", "token_ids", "text"}],
// "log": [llama.cpp's warnings and errors]}.
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

const [file, maxTokens, ...prompts] = process.argv.slice(2);
const log = [];
// One thread: llama.cpp's threads wait by spinning, and beside other tests
// on two cores two of them take ten times as long.
const llama = await getLlama({
  gpu: false, build: "never", progressLogs: false, logLevel: LlamaLogLevel.warn, maxThreads: 1,
  logger: (level, message) => { if (level === "warn" || level === "error" || level === "fatal") log.push(message.trim()); },
});
const model = await llama.loadModel({ modelPath: file });
const runs = [];
for (const prompt of prompts) {
  const ctx = await model.createContext({ contextSize: 256, sequences: 1, threads: 1 });
  const seq = ctx.getSequence();
  const ids = model.tokenize(prompt, false);
  const input = model.tokens.shouldPrependBosToken ? [model.tokens.bos, ...ids] : [...ids];
  const out = [];
  for await (const t of seq.evaluate(input, { temperature: 0 })) {
    out.push(t);
    if (out.length >= Number(maxTokens)) break;
  }
  runs.push({ prompt_token_ids: input, token_ids: out, text: model.detokenize(out) });
  await ctx.dispose();
}
await model.dispose();
await llama.dispose();
console.log(JSON.stringify({ runs, log }));
