"""The one way the mcp 2.x test clients connect: an SDK `Client` over
streamable HTTP with an optional bearer token, no cache, a 30 s read
timeout, and the handshake `mode` (auto probes server/discover first,
legacy initializes). Imported by the scripts beside it (their directory is
on sys.path when they run).
"""
from contextlib import asynccontextmanager

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


@asynccontextmanager
async def connect(url: str, token: str | None, mode: str):
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with create_mcp_http_client(headers=headers) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, mode=mode, cache=None, read_timeout_seconds=30) as client:
            yield client
