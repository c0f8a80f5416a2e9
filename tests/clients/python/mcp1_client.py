"""The official Python SDK 1.x (legacy handshake only) running the cursor loop.

usage: mcp1_client.py URL [--token T] [--read URI ...]
"""
import argparse
import asyncio
import json

from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

from mcp1_loop import cursor_loop


async def main(args) -> dict:
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else None
    async with streamablehttp_client(args.url, headers=headers, timeout=30) as (read, write, _session_id):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            head = {"protocol": init.protocolVersion, "server": init.serverInfo.name}
            return {**head, **await cursor_loop(session, args.read)}


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("--token")
    p.add_argument("--read", action="append", default=[])
    print(json.dumps(asyncio.run(main(p.parse_args()))))
