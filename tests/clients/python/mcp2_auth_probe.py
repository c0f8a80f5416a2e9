"""The Python SDK without a token: it gets the 401, follows the
WWW-Authenticate resource_metadata to the protected-resource metadata, and
finds the authorization servers (the OAuth flow itself then fails: no
authorization server here; tests/oauth_flow.rs runs the whole flow against one).

usage: mcp2_auth_probe.py URL
Prints JSON: requests seen, the metadata URL and the authorization servers.
"""
import asyncio
import json
import sys

import httpx2
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp2_connect import MemoryStorage
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken


async def main(url: str) -> dict:
    seen = []
    provider = OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(redirect_uris=["http://127.0.0.1:9/cb"], client_name="probe"),
        storage=MemoryStorage(),
        redirect_handler=None,
        callback_handler=None,
    )

    async def record(resp: httpx2.Response) -> None:
        seen.append({"method": resp.request.method, "url": str(resp.request.url), "status": resp.status_code,
                     "www_authenticate": resp.headers.get("www-authenticate")})

    error = None
    async with httpx2.AsyncClient(auth=provider, event_hooks={"response": [record]}) as http:
        try:
            async with Client(streamable_http_client(url, http_client=http), mode="legacy", cache=None) as client:
                # Connecting is open (public discovery); listing needs a token.
                await client.list_resources()
        except BaseException as e:  # the flow cannot complete without an authorization server
            error = type(e).__name__
    prm = provider.context.protected_resource_metadata
    return {
        "seen": seen,
        "error": error,
        "resource": str(prm.resource) if prm else None,
        "authorization_servers": [str(u) for u in prm.authorization_servers] if prm else None,
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1]))))
