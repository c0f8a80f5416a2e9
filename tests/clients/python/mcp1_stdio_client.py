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

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from mcp1_loop import cursor_loop


async def main(args) -> dict:
    server = json.loads(args.config)
    params = StdioServerParameters(
        command=server["command"],
        args=server["args"],
        env={**os.environ, **server.get("env", {})},
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            return {"protocol": init.protocolVersion, **await cursor_loop(session, args.read)}


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("config")
    p.add_argument("--read", action="append", default=[])
    print(json.dumps(asyncio.run(main(p.parse_args()))))
