# Speculative decoding on a copy-heavy request (an agent re-emitting code): one tempo9 server
# without and one with --spec-draft 4 on ports 8101/8102; prints wall time per request, the
# completion count and a hash of the reply (equal = identical text), then the draft counters.
# Start: tempo9 serve -m MODEL --port 8101 -t 1 & tempo9 serve -m MODEL --port 8102 -t 1 --spec-draft 4 &
import json, time, urllib.request
code = "".join(f"def f{i}(x):\n    return x * {i} + {i*i}\n\n" for i in range(12))
body = {"messages": [{"role": "system", "content": "You are a careful assistant."},
                     {"role": "user", "content": "Repeat this code exactly, nothing else:\n\n" + code}],
        "max_tokens": 200, "temperature": 0}
for port in (8101, 8102, 8101, 8102, 8101, 8102):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"})
    t = time.time(); r = json.load(urllib.request.urlopen(req)); dt = time.time() - t
    print(port, f"{dt:.2f}s", r["usage"]["completion_tokens"], hash(r["choices"][0]["message"]["content"]) & 0xffff)
for port in (8101, 8102):
    m = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
    print(port, [l for l in m.splitlines() if l.startswith(("tempo9_draft", "tempo9_accepted", "tempo9_engine_steps_total"))])
