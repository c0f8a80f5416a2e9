"""Concurrent traversals of a server's resources/list with the official
Python SDK client (mcp 2.x), as issue 51 observed them: each traversal a
session of its own (legacy handshake), one of USERS users' tokens in turn,
pages until next_cursor is None. Prints one JSON line: traversals done,
pages, failures by message, wall time.

usage: demo_load.py URL TOKEN_FILE [--traversals 200] [--timeout 300]
  TOKEN_FILE: one bearer token per line (one per user).
"""
import argparse
import asyncio
import collections
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "clients", "python"))
from mcp2_connect import connect  # noqa: E402


async def traverse(url, token, results):
    pages = 0
    try:
        async with connect(url, token, "legacy") as client:
            cursor = None
            while True:
                page = await client.list_resources(cursor=cursor)
                pages += 1
                if page.next_cursor is None:
                    break
                cursor = page.next_cursor
        results["done"] += 1
    except BaseException as e:  # noqa: BLE001 - every failure is counted, by message
        results["failures"][f"{type(e).__name__}: {e}"[:160]] += 1
    results["pages"] += pages


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("tokens")
    p.add_argument("--traversals", type=int, default=200)
    p.add_argument("--timeout", type=float, default=300)
    a = p.parse_args()
    tokens = [t.strip() for t in open(a.tokens) if t.strip()]
    results = {"done": 0, "pages": 0, "failures": collections.Counter()}
    started = time.monotonic()
    tasks = [traverse(a.url, tokens[i % len(tokens)], results) for i in range(a.traversals)]
    try:
        await asyncio.wait_for(asyncio.gather(*tasks), a.timeout)
    except asyncio.TimeoutError:
        results["failures"]["timed out"] += a.traversals - results["done"] - sum(results["failures"].values())
    print(json.dumps({
        "traversals": a.traversals,
        "done": results["done"],
        "pages": results["pages"],
        "wall_s": round(time.monotonic() - started, 1),
        "failures": dict(results["failures"]),
    }))


asyncio.run(main())
