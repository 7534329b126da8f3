"""The OpenAI client flow of openai_flow.mjs with OpenAI's Python SDK, and
LangChain's ChatOpenAI on the model it trains: upload, create a job, wait,
list its checkpoints and events, list models, chat with the result (plain,
and streamed with usage), a 404 it understands; then LangChain's invoke and
stream on the same model.

Usage: OPENAI_BASE_URL=http://HOST:PORT/v1 OPENAI_API_KEY=KEY \
       .venv/bin/python openai_flow.py TRAIN.jsonl
Prints one JSON object with what it saw, with the keys openai_flow.mjs
prints and "langchain"; exits non-zero on any error.
"""
import json
import os
import sys
import time

import openai
from langchain_core.messages import HumanMessage
from langchain_openai import ChatOpenAI


def main():
    client = openai.OpenAI()  # OPENAI_BASE_URL and OPENAI_API_KEY from the environment
    out = {}
    with open(sys.argv[1], "rb") as f:
        file = client.files.create(file=f, purpose="fine-tune")
    out["file"] = {"id": file.id, "object": file.object, "purpose": file.purpose}

    job = client.fine_tuning.jobs.create(
        model="burst-small", training_file=file.id, suffix="openai-client",
        method={"type": "supervised", "supervised": {"hyperparameters": {"n_epochs": 1, "batch_size": 4}}},
        # Burst's own field beside OpenAI's: a short run.
        extra_body={"recipe": {"max_steps": 4, "max_seq_len": 128, "checkpoint_every": 2}})
    out["created"] = {"id": job.id, "object": job.object, "status": job.status}
    deadline = time.time() + 120
    while job.status not in ("succeeded", "failed", "cancelled"):
        if time.time() > deadline:
            raise RuntimeError(f"job {job.id} still {job.status}")
        time.sleep(0.25)
        job = client.fine_tuning.jobs.retrieve(job.id)
    out["job"] = {"id": job.id, "status": job.status, "fine_tuned_model": job.fine_tuned_model,
                  "trained_tokens": job.trained_tokens}

    out["checkpoints"] = [{"id": cp.id, "step_number": cp.step_number,
                           "fine_tuned_model_checkpoint": cp.fine_tuned_model_checkpoint}
                          for cp in client.fine_tuning.jobs.checkpoints.list(job.id)]
    events = [ev.message for ev in client.fine_tuning.jobs.list_events(job.id, limit=100)]
    out["events"] = len(events)
    out["last_event"] = events[0] if events else None
    out["models"] = [m.id for m in client.models.list()]

    messages = [{"role": "user", "content": "My order has not arrived. Where is it?"}]
    chat = client.chat.completions.create(model=job.fine_tuned_model, messages=messages, max_tokens=8,
                                          temperature=0)
    out["chat"] = {"object": chat.object, "content": chat.choices[0].message.content,
                   "finish_reason": chat.choices[0].finish_reason, "usage": chat.usage.model_dump()}

    stream = client.chat.completions.create(model=job.fine_tuned_model, messages=messages, max_tokens=8,
                                            temperature=0, stream=True, stream_options={"include_usage": True})
    streamed, chunks, usage = "", 0, None
    for chunk in stream:
        chunks += 1
        if chunk.choices:
            streamed += chunk.choices[0].delta.content or ""
        if chunk.usage is not None:
            usage = chunk.usage.model_dump()
    out["stream"] = {"chunks": chunks, "content": streamed, "usage": usage}

    try:
        client.chat.completions.create(model="ftjob-nosuchjob:step-1", messages=messages)
        out["missing"] = "no error"
    except openai.APIStatusError as e:
        body = e.body if isinstance(e.body, dict) else {}
        out["missing"] = {"status": e.status_code, "code": body.get("code"), "param": body.get("param")}

    llm = ChatOpenAI(model=job.fine_tuned_model, temperature=0, max_tokens=8, base_url=os.environ["OPENAI_BASE_URL"],
                     api_key=os.environ["OPENAI_API_KEY"], stream_usage=True)
    said = llm.invoke([HumanMessage(content=messages[0]["content"])])
    parts = list(llm.stream([HumanMessage(content=messages[0]["content"])]))
    streamed_usage = next((p.usage_metadata for p in parts if p.usage_metadata), None)
    out["langchain"] = {"content": said.content, "usage": said.usage_metadata,
                        "stream": "".join(p.content for p in parts), "stream_usage": streamed_usage}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
