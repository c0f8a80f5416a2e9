"""Helpers for emseepea inventory sources written in Python (componentize-py).

The same helpers as the Rust SDK (sdk/rust), without importing the generated
bindings, so they test on any Python:

- ``page(rows, limit)``: take at most ``limit + 1`` rows, return
  ``(entries, has_more)`` with ``has_more`` truthful;
- ``fetch(limit)``: how many rows to ask the backend for (``limit + 1``);
- ``entry(key, uri, name, mime_type)`` and ``json_page(entries, has_more)``:
  a page as ``inventory-json``'s ``list`` returns it (world
  inventory-source-json): UTF-8 JSON bytes, encoded by CPython's C encoder
  and copied to the host as one block instead of object by object;
- keys (1..=256 printable ASCII characters, compared as bytes), all
  order-preserving: ``number``, ``signed``, ``timestamp_ms``, ``escape`` /
  ``unescape`` for any string, ``composite(*parts)`` for a key with a
  tie-breaker;
- ``subject_of(context)``: the caller's user id or ``None``; a per-user
  source must refuse on ``None`` (``require_subject`` raises what you pass);
- ``remaining_ms(context)``: the time left before the call's deadline.

Module globals may persist between calls of one caller (the host keeps an
instance for that caller's next call) and never reach another caller; do not
rely on them being empty or kept, and never mix callers' data in them. Handles
(connections, requests) never persist. See the book: Concepts, "Instances".
"""
import json
import time
from typing import Any, Callable, Iterable, List, Optional, Tuple, TypeVar

T = TypeVar("T")

MAX_KEY_LEN = 256
SEPARATOR = "!"


def fetch(limit: int) -> int:
    """Rows to ask the backend for: one more than ``limit`` decides has_more."""
    return limit + 1


def page(rows: Iterable[T], limit: int) -> Tuple[List[T], bool]:
    """At most ``limit`` rows, and whether a ``limit + 1``-th existed.

    Stops pulling from ``rows`` after ``limit + 1``; with ``limit`` 0 it
    promises nothing (a page with has_more must hold an entry)."""
    taken: List[T] = []
    for row in rows:
        if len(taken) == limit:
            return taken, limit > 0
        taken.append(row)
    return taken, False


def entry(key: str, uri: str, name: str, mime_type: Optional[str] = None) -> dict:
    """One listed entry, as ``json_page`` takes it."""
    resource = {"uri": uri, "name": name}
    if mime_type is not None:
        resource["mimeType"] = mime_type
    return {"key": key, "resource": resource}


def json_page(entries: Iterable[dict], has_more: bool) -> bytes:
    """The page ``inventory-json``'s ``list`` returns: the UTF-8 JSON of
    ``{"entries": [...], "hasMore": ...}`` (entries from ``entry``)."""
    return json.dumps({"entries": list(entries), "hasMore": bool(has_more)},
                      ensure_ascii=False, separators=(",", ":")).encode()


def number(n: int) -> str:
    """A non-negative integer below 2**64, zero-padded to 20 digits."""
    if not 0 <= n < 2**64:
        raise ValueError(f"{n} is not a u64")
    return f"{n:020d}"


def signed(n: int) -> str:
    """A signed 64-bit integer, offset so negatives sort first."""
    if not -(2**63) <= n < 2**63:
        raise ValueError(f"{n} is not an i64")
    return number(n + 2**63)


def timestamp_ms(ms: int) -> str:
    """Unix milliseconds, fixed width."""
    return number(ms)


def escape(s: str) -> str:
    """Any string as key characters, keeping (UTF-8) byte order: ``$``..``}``
    stay, lower bytes become ``#XX``, higher ``~XX``; never contains ``!``."""
    out = []
    for b in s.encode("utf-8"):
        if 0x24 <= b <= 0x7D:
            out.append(chr(b))
        elif b <= 0x23:
            out.append(f"#{b:02X}")
        else:
            out.append(f"~{b:02X}")
    return "".join(out)


def unescape(key: str) -> Optional[str]:
    """The inverse of ``escape``; ``None`` for text it cannot produce."""
    out = bytearray()
    i = 0
    while i < len(key):
        c = key[i]
        if c in "#~":
            hexpart = key[i + 1:i + 3]
            if len(hexpart) != 2 or any(h not in "0123456789ABCDEF" for h in hexpart):
                return None
            out.append(int(hexpart, 16))
            i += 3
        elif 0x24 <= ord(c) <= 0x7D:
            out.append(ord(c))
            i += 1
        else:
            return None
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError:
        return None


def check(key: str) -> str:
    """``key`` if the host accepts it, else ``ValueError``."""
    if not key or len(key) > MAX_KEY_LEN or any(not 0x21 <= ord(c) <= 0x7E for c in key):
        raise ValueError(f"not a valid key: {key[:40]!r}")
    return key


def composite(*parts: Any) -> str:
    """A key compared part by part: ints via ``number``, strings via
    ``escape``, joined by ``!`` (below every part character, so a shorter
    part sorts before its extensions). Use the record id last as tie-breaker."""
    encoded = [number(p) if isinstance(p, int) else escape(str(p)) for p in parts]
    return check(SEPARATOR.join(encoded))


def subject_of(context: Any) -> Optional[str]:
    """The caller's user id, or ``None`` (no principal, or no subject)."""
    principal = getattr(context, "principal", None)
    subject = getattr(principal, "subject", None) if principal is not None else None
    return subject or None


def require_subject(context: Any, refusal: Callable[[], BaseException]) -> str:
    """The caller's user id; raises ``refusal()`` without one, e.g.
    ``require_subject(ctx, lambda: Err(SourceError_Failed("A verified user is required")))``."""
    subject = subject_of(context)
    if subject is None:
        raise refusal()
    return subject


def remaining_ms(context: Any, now_ms: Optional[int] = None) -> int:
    """Milliseconds left before ``context.deadline_ms`` (0 once passed)."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    return max(0, int(context.deadline_ms) - now)
