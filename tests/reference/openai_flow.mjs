// An OpenAI-style client flow against a Burst server, with the official
// `openai` client: upload, create a job, wait, list its checkpoints and
// events, list models, and chat with the result (plain and streamed).
// Usage: OPENAI_BASE_URL=http://HOST:PORT/v1 OPENAI_API_KEY=KEY node openai_flow.mjs TRAIN.jsonl
// Prints one JSON object with what it saw; exits non-zero on any error.
import fs from "node:fs";
import OpenAI from "openai";

const client = new OpenAI();  // OPENAI_BASE_URL and OPENAI_API_KEY from the environment
const out = {};

const file = await client.files.create({ file: fs.createReadStream(process.argv[2]), purpose: "fine-tune" });
out.file = { id: file.id, object: file.object, purpose: file.purpose };

let job = await client.fineTuning.jobs.create({
  model: "burst-small",
  training_file: file.id,
  suffix: "openai-client",
  method: { type: "supervised", supervised: { hyperparameters: { n_epochs: 1, batch_size: 4 } } },
  // Burst's own field beside OpenAI's: a short run.
  recipe: { max_steps: 4, max_seq_len: 128, checkpoint_every: 2 },
});
out.created = { id: job.id, object: job.object, status: job.status };
const deadline = Date.now() + 120_000;
while (!["succeeded", "failed", "cancelled"].includes(job.status)) {
  if (Date.now() > deadline) throw new Error(`job ${job.id} still ${job.status}`);
  await new Promise((r) => setTimeout(r, 250));
  job = await client.fineTuning.jobs.retrieve(job.id);
}
out.job = { id: job.id, status: job.status, fine_tuned_model: job.fine_tuned_model, trained_tokens: job.trained_tokens };

const checkpoints = [];
for await (const cp of client.fineTuning.jobs.checkpoints.list(job.id)) {
  checkpoints.push({ id: cp.id, step_number: cp.step_number, fine_tuned_model_checkpoint: cp.fine_tuned_model_checkpoint });
}
out.checkpoints = checkpoints;

const events = [];
for await (const ev of client.fineTuning.jobs.listEvents(job.id, { limit: 100 })) events.push(ev.message);
out.events = events.length;
out.last_event = events[0];

const models = [];
for await (const m of client.models.list()) models.push(m.id);
out.models = models;

const messages = [{ role: "user", content: "My order has not arrived. Where is it?" }];
const chat = await client.chat.completions.create({
  model: job.fine_tuned_model, messages, max_tokens: 8, temperature: 0,
});
out.chat = { object: chat.object, content: chat.choices[0].message.content, finish_reason: chat.choices[0].finish_reason,
             usage: chat.usage };

const stream = await client.chat.completions.create({
  model: job.fine_tuned_model, messages, max_tokens: 8, temperature: 0, stream: true,
});
let streamed = "";
let chunks = 0;
for await (const chunk of stream) {
  chunks += 1;
  streamed += chunk.choices[0]?.delta?.content ?? "";
}
out.stream = { chunks, content: streamed };

try {
  await client.chat.completions.create({ model: "ftjob-nosuchjob:step-1", messages });
  out.missing = "no error";
} catch (e) {
  out.missing = { status: e.status, code: e.code, param: e.param };
}
console.log(JSON.stringify(out));
