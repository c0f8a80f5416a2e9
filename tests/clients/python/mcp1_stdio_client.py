"""The official Python SDK (mcp 1.x) over stdio: stdio_client spawns the
server from a client configuration ({"command", "args", "env"}), runs the
cursor loop, lists templates and reads.

usage: mcp1_stdio_client.py CONFIG_JSON [--read URI ...]
Prints one JSON object: protocol, uris, pages, templates, reads, missing, unauthorized.
"""
import argparse
import asyncio
import json
import os

from mcp import ClientSession, McpError, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import TextResourceContents


async def main(args) -> dict:
    server = json.loads(args.config)
    params = StdioServerParameters(
        command=server["command"],
        args=server["args"],
        env={**os.environ, **server.get("env", {})},
    )
    out = {"uris": [], "pages": 0, "reads": {}}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            out["protocol"] = init.protocolVersion
            cursor = None
            while True:
                try:
                    page = await session.list_resources(cursor=cursor)
                except McpError as e:
                    out["list_error"] = {"code": e.error.code, "message": e.error.message}
                    break
                out["pages"] += 1
                out["uris"] += [str(r.uri) for r in page.resources]
                if page.nextCursor is None:
                    break
                cursor = page.nextCursor
            templates = await session.list_resource_templates()
            out["templates"] = [t.uriTemplate for t in templates.resourceTemplates]
            for uri in args.read:
                try:
                    res = await session.read_resource(uri)
                except McpError as e:
                    out["reads"][uri] = {"error": e.error.code, "message": e.error.message}
                    continue
                c = res.contents[0]
                out["reads"][uri] = c.text if isinstance(c, TextResourceContents) else {"blob": c.blob}
            try:
                await session.read_resource("nothing://here")
                out["missing"] = None
            except McpError as e:
                out["missing"] = e.error.code
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("config")
    p.add_argument("--read", action="append", default=[])
    print(json.dumps(asyncio.run(main(p.parse_args()))))
