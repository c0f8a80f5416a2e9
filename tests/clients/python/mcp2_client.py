"""The official Python SDK (mcp 2.x) running the seed-004 cursor loop.

usage: mcp2_client.py URL [--token T] [--mode auto|legacy] [--read URI ...]
Prints one JSON object: protocol, uris, pages, templates, reads, missing.
"""
import argparse
import asyncio
import json

from mcp import MCPError
from mcp.types import BlobResourceContents, TextResourceContents

from mcp2_connect import connect


async def main(args) -> dict:
    out = {"uris": [], "pages": 0, "reads": {}}
    async with connect(args.url, args.token, args.mode) as client:
        out["protocol"] = client.protocol_version
        out["server"] = client.server_info.name if client.server_info else None
        # The loop of seed 004: start without a cursor, accumulate, stop when next_cursor is None.
        cursor = None
        while True:
            page = await client.list_resources(cursor=cursor)
            out["pages"] += 1
            out["uris"] += [str(r.uri) for r in page.resources]
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        templates = await client.list_resource_templates()
        out["templates"] = [t.uri_template for t in templates.resource_templates]
        for uri in args.read:
            res = await client.read_resource(uri)
            c = res.contents[0]
            out["reads"][uri] = c.text if isinstance(c, TextResourceContents) else {"blob": c.blob}
        try:
            await client.read_resource("nothing://here")
            out["missing"] = None
        except MCPError as e:
            out["missing"] = e.error.code
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("--token")
    p.add_argument("--mode", default="auto")
    p.add_argument("--read", action="append", default=[])
    print(json.dumps(asyncio.run(main(p.parse_args()))))
