"""OpenAI's Batch API with OpenAI's Python SDK against Burst: upload an
input file (purpose "batch") of N chat requests and one whose body is bad,
create the batch, wait, read its output and error files, list batches;
then a second batch cancelled at once.

Usage: OPENAI_BASE_URL=http://HOST:PORT/v1 OPENAI_API_KEY=KEY \
       .venv/bin/python openai_batch.py N
Prints one JSON object with what it saw; exits non-zero on any error.
"""
import json
import sys
import tempfile
import time

import openai


def wait(client, batch, timeout=240):
    deadline = time.time() + timeout
    while batch.status not in ("completed", "failed", "cancelled", "expired"):
        if time.time() > deadline:
            raise RuntimeError(f"batch {batch.id} still {batch.status}")
        time.sleep(0.25)
        batch = client.batches.retrieve(batch.id)
    return batch


def main():
    n = int(sys.argv[1])
    client = openai.OpenAI()  # OPENAI_BASE_URL and OPENAI_API_KEY from the environment
    lines = [{"custom_id": f"ticket-{i}", "method": "POST", "url": "/v1/chat/completions",
              "body": {"model": "burst-small", "max_tokens": 6, "seed": i,
                       "messages": [{"role": "user", "content": f"Ticket {i}: I was charged twice."}]}}
             for i in range(n)]
    lines.append({"custom_id": "bad-temperature", "method": "POST", "url": "/v1/chat/completions",
                  "body": {"model": "burst-small", "temperature": -1,
                           "messages": [{"role": "user", "content": "hello"}]}})
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        f.write("".join(json.dumps(line) + "\n" for line in lines))
    out = {}
    with open(f.name, "rb") as fh:
        file = client.files.create(file=fh, purpose="batch")
    out["file"] = {"id": file.id, "purpose": file.purpose}
    batch = client.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions",
                                  completion_window="24h", metadata={"team": "support"})
    out["created"] = {"id": batch.id, "object": batch.object, "status": batch.status,
                      "total": batch.request_counts.total}
    batch = wait(client, batch)
    out["batch"] = {"id": batch.id, "status": batch.status, "metadata": batch.metadata,
                    "counts": batch.request_counts.model_dump(), "usage": batch.usage.model_dump(),
                    "output_file_id": batch.output_file_id, "error_file_id": batch.error_file_id,
                    "in_progress_at": batch.in_progress_at, "completed_at": batch.completed_at}
    output = [json.loads(x) for x in client.files.content(batch.output_file_id).text.splitlines()]
    errors = [json.loads(x) for x in client.files.content(batch.error_file_id).text.splitlines()]
    out["output"] = [{"custom_id": x["custom_id"], "status": x["response"]["status_code"],
                      "object": x["response"]["body"]["object"],
                      "content": x["response"]["body"]["choices"][0]["message"]["content"],
                      "usage": x["response"]["body"]["usage"]} for x in output]
    out["errors"] = [{"custom_id": x["custom_id"], "status": x["response"]["status_code"],
                      "error": x["response"]["body"]["error"]} for x in errors]
    out["output_file"] = client.files.retrieve(batch.output_file_id).purpose
    out["listed"] = [b.id for b in client.batches.list(limit=10)]

    again = client.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions",
                                  completion_window="24h")
    cancelled = client.batches.cancel(again.id)
    out["cancelled"] = {"id": cancelled.id, "status": wait(client, cancelled).status}
    try:
        client.batches.create(input_file_id=file.id, endpoint="/v1/completions", completion_window="24h")
        out["wrong_endpoint"] = None
    except openai.BadRequestError as e:
        out["wrong_endpoint"] = {"status": e.status_code, "param": e.body.get("param") if isinstance(e.body, dict) else None}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
