"""The official Python SDK 1.x (legacy handshake only) running the cursor loop.

usage: mcp1_client.py URL [--token T] [--read URI ...]
"""
import argparse
import asyncio
import json

from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client
from mcp.shared.exceptions import McpError


async def main(args) -> dict:
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else None
    out = {"uris": [], "pages": 0, "reads": {}}
    async with streamablehttp_client(args.url, headers=headers, timeout=30) as (read, write, _session_id):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            out["protocol"] = init.protocolVersion
            out["server"] = init.serverInfo.name
            cursor = None
            while True:
                page = await session.list_resources(cursor=cursor)
                out["pages"] += 1
                out["uris"] += [str(r.uri) for r in page.resources]
                if page.nextCursor is None:
                    break
                cursor = page.nextCursor
            templates = await session.list_resource_templates()
            out["templates"] = [t.uriTemplate for t in templates.resourceTemplates]
            for uri in args.read:
                res = await session.read_resource(uri)
                c = res.contents[0]
                out["reads"][uri] = getattr(c, "text", None) or {"blob": c.blob}
            try:
                await session.read_resource("nothing://here")
                out["missing"] = None
            except McpError as e:
                out["missing"] = e.error.code
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("--token")
    p.add_argument("--read", action="append", default=[])
    print(json.dumps(asyncio.run(main(p.parse_args()))))
