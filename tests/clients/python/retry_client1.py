"""The official Python SDK 1.x in a client loop that meets a 429.

usage: retry_client1.py URL --token T --uri URI

SDK 1.x raises the 429 (`httpx.HTTPStatusError` from `raise_for_status()`)
inside its transport's task group, which ends the session; the loop opens a
new session and retries until it has been refused at least once and then
served. Prints one JSON object: refused, errors (exception type names and
statuses seen), early (reads served before the refusals began), text.
"""
import argparse
import asyncio
import json

import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client


def leaves(exc):
    """The exceptions inside (nested) exception groups."""
    if isinstance(exc, BaseExceptionGroup):
        for e in exc.exceptions:
            yield from leaves(e)
    else:
        yield exc


async def read_once(args):
    headers = {"Authorization": f"Bearer {args.token}"}
    async with streamablehttp_client(args.url, headers=headers, timeout=30) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            res = await session.read_resource(args.uri)
            return res.contents[0].text


async def main(args) -> dict:
    out = {"refused": 0, "errors": [], "early": 0, "text": None}
    for _ in range(100):
        try:
            text = await asyncio.wait_for(read_once(args), 60)
        except Exception as exc:  # what the SDK raises for a 429, whatever its wrapping
            out["refused"] += 1
            for e in leaves(exc):
                status = e.response.status_code if isinstance(e, httpx.HTTPStatusError) else None
                seen = f"{type(e).__name__}:{status}"
                if seen not in out["errors"]:
                    out["errors"].append(seen)
            await asyncio.sleep(1)
            continue
        if out["refused"] == 0:
            out["early"] += 1
            await asyncio.sleep(0.1)
            continue
        out["text"] = text
        break
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("--token", required=True)
    p.add_argument("--uri", required=True)
    print(json.dumps(asyncio.run(main(p.parse_args()))))
