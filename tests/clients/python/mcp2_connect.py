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
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken


@asynccontextmanager
async def connect(url: str, token: str | None, mode: str):
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with create_mcp_http_client(headers=headers) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, mode=mode, cache=None, read_timeout_seconds=30) as client:
            yield client


class MemoryStorage:
    """The OAuth client's token storage, in memory for one run."""

    def __init__(self):
        self.tokens = None
        self.client_info = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info
