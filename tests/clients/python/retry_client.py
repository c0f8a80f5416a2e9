"""The official Python SDK (mcp 2.x) in a client loop that meets a 429.

usage: retry_client.py URL --token T [--mode auto|legacy] --uri URI

Reads URI until it has been refused at least once (MCPError with the
server's retryable code; it waits the `retryAfterMs` the error carries) and
then served, all on one client. Prints one JSON object: refused, codes,
retryAfterMs, early (reads served before the refusals began), text.
"""
import argparse
import asyncio
import json

from mcp import MCPError

from mcp2_connect import connect


async def main(args) -> dict:
    out = {"refused": 0, "codes": [], "retryAfterMs": None, "early": 0, "text": None}
    async with connect(args.url, args.token, args.mode) as client:
        for _ in range(300):
            try:
                res = await client.read_resource(args.uri)
            except MCPError as e:
                out["refused"] += 1
                if e.error.code not in out["codes"]:
                    out["codes"].append(e.error.code)
                data = e.error.data if isinstance(e.error.data, dict) else {}
                out["retryAfterMs"] = data.get("retryAfterMs")
                await asyncio.sleep((out["retryAfterMs"] or 1000) / 1000)
                continue
            if out["refused"] == 0:
                # The test's slow read does not hold the slot yet.
                out["early"] += 1
                await asyncio.sleep(0.1)
                continue
            out["text"] = res.contents[0].text
            break
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("--token", required=True)
    p.add_argument("--mode", default="auto")
    p.add_argument("--uri", required=True)
    print(json.dumps(asyncio.run(main(p.parse_args()))))
