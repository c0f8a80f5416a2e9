# Interleaved C = 1 latency of two MCP servers (benchmarks/pair.sh): page i goes to A then B,
# or B then A, so the VM's slow phases hit both alike. Usage: pair.py URL_A TOKEN_A URL_B TOKEN_B N MODE
import http.client, json, sys, time, statistics
from urllib.parse import urlparse

class Client:
    def __init__(self, url, token):
        u = urlparse(url); self.path = u.path
        self.c = http.client.HTTPConnection(u.hostname, u.port)
        self.h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                  "MCP-Protocol-Version": "2025-06-18", "Authorization": "Bearer " + token}
        r = self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "pair", "version": "1"}}}, raw=True)
        self.h["Mcp-Session-Id"] = r.getheader("Mcp-Session-Id"); r.read()
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        self.cursor = None; self.fixed = None
    def post(self, msg, raw=False):
        self.c.request("POST", self.path, json.dumps(msg), self.h)
        r = self.c.getresponse()
        if raw: return r
        b = r.read()
        return json.loads(b) if b else None
    def page(self):
        p = {} if self.cursor is None else {"cursor": self.cursor}
        t = time.perf_counter_ns()
        r = self.post({"jsonrpc": "2.0", "id": 1, "method": "resources/list", "params": p})
        dt = time.perf_counter_ns() - t
        assert len(r["result"]["resources"]) == 50, r
        return dt, r["result"].get("nextCursor")

a = Client(sys.argv[1], sys.argv[2]); b = Client(sys.argv[3], sys.argv[4])
n = int(sys.argv[5]); mode = sys.argv[6]
for cl in (a, b):
    if mode == "fixed":
        for _ in range(100):
            _, cl.cursor = cl.page()
        cl.fixed = cl.cursor
lat = {0: [], 1: []}
for i in range(n):
    for k, cl in ((0, a), (1, b)) if i % 2 == 0 else ((1, b), (0, a)):
        dt, nxt = cl.page()
        lat[k].append(dt / 1000)
        if mode == "traversal":
            cl.cursor = nxt
        else:
            cl.cursor = cl.fixed
for k in (0, 1):
    x = sorted(lat[k])
    print(f"{'AB'[k]}: p10 {x[len(x)//10]:.1f} p50 {x[len(x)//2]:.1f} p90 {x[len(x)*9//10]:.1f} mean {statistics.mean(x):.1f} us")
