#!/usr/bin/env python3
"""Issue 14's targets, cell by cell, from one bench.sh run (stdlib only).

Usage: benchmarks/targets.py RESULTS.jsonl [SERVER]
       benchmarks/targets.py RESULTS.jsonl --languages
  RESULTS.jsonl: what ../shared/peers/bench.sh wrote (benchmarks/peers.sh
  prints its directory); SERVER: the emseepea column (default "emseepea").
  --languages: issue 51's table instead: each emseepea server against the
  SDK server of its source's language (Rust: rmcp, Python: python-2w,
  JavaScript: ts-sdk), with errors and p99.

Prints, for every mode and client count, emseepea against rmcp (pages/s and
pages per server CPU-second), p99, and the multiples of the TypeScript and
Python SDKs, each with "ok" or "below"; then, for each multiple, the rate it
asks for as a share of bare hyper's in the same cell. Bare hyper answers with
precomputed bytes, so its rate is what the driver and the kernel allow: a
multiple that asks for more than ~100 % of it is out of any server's reach
on that machine (the twenty-fourth round of BENCHMARKS.md). Last, each
server's share of a one-client round trip (its C = 1 round trip less bare
hyper's), and the SDK multiples read the other way the issue's sentence
allows: each server's best cell of a mode against the SDK's best cell.
"""

import json
import statistics
import sys
from collections import defaultdict

# The targets: at least rmcp, p99 at C = 64, and these multiples of
# the SDKs (bench.sh's server name, the multiple, the name printed).
P99_MS_AT_64 = 5.0
SDKS = (("ts-sdk", 7.0, "TS"), ("python-2w", 10.0, "Python"))


def load(path):
    """(mode, server, conns) -> median of ok_rps, p99_ms, pages per CPU-s."""
    rows = defaultdict(list)
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            r = json.loads(line)
            if "driver" in r:
                d = r["driver"]
                rows[(d["mode"], r["server"], d["conns"])].append(r)
    cells = {}
    for key, rs in rows.items():
        rps = statistics.median(r["driver"]["ok_rps"] for r in rs)
        p99 = statistics.median(r["driver"]["p99_ms"] for r in rs)
        cores = [r["srv_cpu_s"] / r["wall_s"] for r in rs if r.get("srv_cpu_s") and r.get("wall_s")]
        per_cpu = rps / statistics.median(cores) if cores else None
        cells[key] = {"rps": rps, "p99": p99, "per_cpu": per_cpu}
    return cells


# Issue 51: (emseepea server, its language's SDK server, language, the
# multiple asked at C >= 16, the multiple asked at C = 1).
LANGUAGES = (
    ("emseepea", "rmcp", "Rust", 1.0, 1.0),
    ("emseepea-py", "python-2w", "Python", 1.0, 0.7),
    ("emseepea-js", "ts-sdk", "JavaScript", 1.0, 0.7),
)


def errors(path):
    """(mode, server, conns) -> errors summed over the runs."""
    out = defaultdict(int)
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                r = json.loads(line)
                if "driver" in r:
                    d = r["driver"]
                    out[(d["mode"], r["server"], d["conns"])] += d.get("errors", 0)
    return out


def languages(path):
    """Each language's emseepea server against its SDK server, cell by cell."""
    cells = load(path)
    errs = errors(path)
    print(f"Issue 51's targets ({path})")
    print()
    print("| language | mode, C | pages/s (SDK) | × SDK | errors | p99 ms (SDK) |")
    print("|---|---|---|---|---|---|")
    for ours, sdk, name, wanted, wanted_at_1 in LANGUAGES:
        for mode in ("fixed", "traversal"):
            for c in sorted({k[2] for k in cells if k[1] == ours and k[0] == mode}):
                e, p = cells.get((mode, ours, c)), cells.get((mode, sdk, c))
                if e is None or p is None:
                    continue
                r = e["rps"] / p["rps"]
                need = wanted_at_1 if c == 1 else wanted
                n = errs[(mode, ours, c)]
                p99 = "" if c < 64 else (" ok" if e["p99"] <= p["p99"] else " worse")
                print(
                    f"| {name} | {mode}, {c} | {e['rps']:.0f} ({p['rps']:.0f}) "
                    f"| {r:.2f} {verdict(r >= need)} (≥ {need}) | {n}{'' if n == 0 or c < 64 else ' refused'} "
                    f"| {e['p99']:.1f} ({p['p99']:.1f}){p99} |"
                )


def verdict(ok):
    return "ok" if ok else "below"


def main(path, ours):
    cells = load(path)
    modes = [m for m in ("fixed", "traversal") if any(k[0] == m for k in cells)]
    conns = sorted({c for (_, s, c) in cells if s == ours})
    if not conns:
        sys.exit(f"no cells of server {ours!r} in {path}")
    print(f"Issue 14's targets for {ours} ({path})")
    print()
    print("| mode, C | × rmcp pages/s | × rmcp pages per CPU-s | p99 ms (rmcp) | × TS SDK | × Python SDK |")
    print("|---|---|---|---|---|---|")
    bounds = []
    for mode in modes:
        for c in conns:
            e = cells.get((mode, ours, c))
            if e is None:
                continue
            rmcp = cells.get((mode, "rmcp", c))
            bare = cells.get((mode, "bare-hyper", c))
            out = [f"{mode}, {c}"]
            if rmcp:
                r = e["rps"] / rmcp["rps"]
                out.append(f"{r:.2f} {verdict(r >= 1.0)}")
                if e["per_cpu"] and rmcp["per_cpu"]:
                    q = e["per_cpu"] / rmcp["per_cpu"]
                    out.append(f"{q:.2f} {verdict(q >= 1.0)}")
                else:
                    out.append("—")
            else:
                out += ["—", "—"]
            p99 = f"{e['p99']:.2f}" + (f" ({rmcp['p99']:.2f})" if rmcp else "")
            if c == 64:
                p99 += f" {verdict(e['p99'] <= P99_MS_AT_64)}"
            out.append(p99)
            for server, multiple, name in SDKS:
                sdk = cells.get((mode, server, c))
                if sdk:
                    m = e["rps"] / sdk["rps"]
                    out.append(f"{m:.1f} {verdict(m >= multiple)}")
                    if bare:
                        bounds.append((mode, c, name, multiple, multiple * sdk["rps"], bare["rps"], e["rps"]))
                else:
                    out.append("—")
            print("| " + " | ".join(out) + " |")
    if bounds:
        print()
        print("What each multiple asks for, against bare hyper in the same cell (its rate is the")
        print("driver's and the kernel's ceiling; above ~100 % no server can meet the multiple):")
        print()
        print("| mode, C | multiple | asks for pages/s | bare hyper | asks, % of bare hyper | ours, % of bare hyper |")
        print("|---|---|---|---|---|---|")
        for mode, c, name, multiple, asks, bare, mine in bounds:
            print(
                f"| {mode}, {c} | {multiple:g}× {name} | {asks:,.0f} | {bare:,.0f} "
                f"| {100 * asks / bare:.1f} % | {100 * mine / bare:.1f} % |"
            )
    shares(cells, modes, ours)
    peaks(cells, modes, ours)


def shares(cells, modes, ours):
    """Each server's part of a one-client round trip: 1/rate - 1/bare hyper's."""
    rows = []
    for mode in modes:
        bare = cells.get((mode, "bare-hyper", 1))
        if not bare:
            continue
        for server in (ours, "rmcp"):
            e = cells.get((mode, server, 1))
            if e:
                rows.append((mode, server, 1e6 / e["rps"] - 1e6 / bare["rps"], 1e6 / bare["rps"]))
    if not rows:
        return
    print()
    print("One client: the server's part of a round trip (its C = 1 round trip less bare hyper's):")
    print()
    print("| mode | server | µs per round trip beyond bare hyper's | bare hyper's round trip µs |")
    print("|---|---|---|---|")
    for mode, server, share, bare_rt in rows:
        print(f"| {mode} | {server} | {share:.1f} | {bare_rt:.1f} |")


def peaks(cells, modes, ours):
    """The multiples as best cell against best cell, per mode."""
    rows = []
    for mode in modes:
        mine = best(cells, mode, ours)
        for server, multiple, name in SDKS:
            theirs = best(cells, mode, server)
            if mine and theirs:
                rows.append((mode, name, multiple, mine, theirs))
    if not rows:
        return
    print()
    print("The SDK multiples, best cell against best cell (any C), per mode:")
    print()
    print("| mode | multiple | ours, best pages/s | SDK, best pages/s | × |")
    print("|---|---|---|---|---|")
    for mode, name, multiple, mine, theirs in rows:
        m = mine / theirs
        print(f"| {mode} | {multiple:g}× {name} | {mine:,.0f} | {theirs:,.0f} | {m:.1f} {verdict(m >= multiple)} |")


def best(cells, mode, server):
    """A server's highest pages/s over the client counts of a mode."""
    rates = [v["rps"] for (m, s, _), v in cells.items() if m == mode and s == server]
    return max(rates) if rates else None


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[2] == "--languages":
    languages(sys.argv[1])
    sys.exit(0)

if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        print(__doc__)
        sys.exit(2)
    main(sys.argv[1], sys.argv[2] if len(sys.argv) == 3 else "emseepea")
