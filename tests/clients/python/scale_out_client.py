"""The official Python SDK (mcp 2.x) listing through a proxy in front of
several instances, with the seed's recovery: "restart without a cursor if
it rejects one".

usage: scale_out_client.py URL --token T [--mode auto|legacy] [--pause-after N]

With --pause-after N, after N pages of the first traversal it prints
{"paused": N} and waits for a line on stdin (meanwhile the test stops or
restarts an instance). A page asked with a cursor that is refused with
-32602 (the generic invalid-cursor error) restarts the listing from the
start, at most 3 times. Prints one JSON object last: protocol, uris (of the
traversal that completed), pages (all pages asked, restarts included),
rejected (each refusal's code and message, in order), restarts.
"""
import argparse
import asyncio
import json
import sys

from mcp import MCPError

from mcp2_connect import connect

INVALID_PARAMS = -32602
MAX_RESTARTS = 3


async def main(args) -> dict:
    out = {"uris": [], "pages": 0, "rejected": [], "restarts": 0}
    async with connect(args.url, args.token, args.mode) as client:
        out["protocol"] = client.protocol_version
        cursor = None
        paused = args.pause_after is None
        while True:
            try:
                page = await client.list_resources(cursor=cursor)
            except MCPError as e:
                if cursor is None or e.error.code != INVALID_PARAMS or out["restarts"] >= MAX_RESTARTS:
                    raise
                # The instance that sealed this cursor is gone (or was
                # restarted): the listing starts over.
                out["rejected"].append({"code": e.error.code, "message": e.error.message})
                out["restarts"] += 1
                out["uris"] = []
                cursor = None
                continue
            out["pages"] += 1
            out["uris"] += [str(r.uri) for r in page.resources]
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
            if not paused and out["pages"] == args.pause_after:
                paused = True
                print(json.dumps({"paused": out["pages"]}), flush=True)
                await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("--token", required=True)
    p.add_argument("--mode", default="auto")
    p.add_argument("--pause-after", type=int)
    print(json.dumps(asyncio.run(main(p.parse_args()))), flush=True)
