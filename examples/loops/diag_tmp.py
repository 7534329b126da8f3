import sys, time
sys.path.insert(0, "/work/main/examples/loops")
from common import LABELS, Task, connect, tickets, types
from burst._http import Http
import os
sc = connect()
tc = sc.create_lora_training_client(base_model="burst-small", rank=8, seed=0)
task = Task(tc.get_tokenizer())
held = tickets("valid", 48)
data = []
for t in held:
    p = task.prompt(t)
    for label in LABELS:
        seq = p + task.label_tokens[label]
        data.append(types.Datum(model_input=types.ModelInput.from_ints(seq[:-1]), loss_fn_inputs={"target_tokens": seq[1:]}))
print("tokens", sum(len(d.model_input.to_ints()) for d in data))
http = Http(os.environ["BURST_URL"], os.environ["BURST_API_KEY"])
for i in range(3):
    t0 = time.perf_counter()
    f = tc.forward(data)
    r = http.post("/api/v1/retrieve_future", {"request_id": f.request_id})
    while r.get("type") == "try_again":
        r = http.post("/api/v1/retrieve_future", {"request_id": f.request_id})
    print("forward wall %.2f s" % (time.perf_counter() - t0), r["burst"])
for i in range(2):
    t0 = time.perf_counter()
    f = tc.forward_backward(data[:96], "cross_entropy")
    r = http.post("/api/v1/retrieve_future", {"request_id": f.request_id})
    while r.get("type") == "try_again":
        r = http.post("/api/v1/retrieve_future", {"request_id": f.request_id})
    print("fb96 wall %.2f s" % (time.perf_counter() - t0), r["burst"])
