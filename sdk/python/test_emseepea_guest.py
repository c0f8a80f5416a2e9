"""Unit tests of the Python guest SDK: python -m pytest sdk/python"""
import itertools
import json
from types import SimpleNamespace

import pytest

import emseepea_guest as g


def test_page_takes_limit_plus_one_and_tells_the_truth():
    assert g.fetch(3) == 4
    assert g.page(range(4), 3) == ([0, 1, 2], True)
    assert g.page(range(3), 3) == ([0, 1, 2], False)
    assert g.page([], 3) == ([], False)
    assert g.page(range(5), 0) == ([], False)


def test_page_stops_pulling_rows():
    pulled = []
    rows = (pulled.append(i) or i for i in itertools.count())
    g.page(rows, 2)
    assert len(pulled) == 3


def test_json_page_is_the_host_shape_in_utf8():
    entries = [g.entry("k1", "x://1", "One \"é\"", "text/plain"), g.entry("k2", "x://2", "Two")]
    body = g.json_page(entries, 1)
    assert isinstance(body, bytes)
    assert json.loads(body.decode("utf-8")) == {
        "entries": [
            {"key": "k1", "resource": {"uri": "x://1", "name": "One \"é\"", "mimeType": "text/plain"}},
            {"key": "k2", "resource": {"uri": "x://2", "name": "Two"}},
        ],
        "hasMore": True,
    }
    assert "é".encode() in body
    assert g.json_page(iter([]), False) == b'{"entries":[],"hasMore":false}'


def test_numbers_sort_numerically():
    ns = [0, 1, 9, 10, 99, 100, 2**64 - 1]
    assert [g.number(n) for n in ns] == sorted(g.number(n) for n in ns)
    ss = [-(2**63), -100, -1, 0, 1, 2**63 - 1]
    assert [g.signed(n) for n in ss] == sorted(g.signed(n) for n in ss)
    with pytest.raises(ValueError):
        g.number(-1)


SAMPLES = ["", "\0", " ", "!", '"', "#", "$", "%", "A", "a", "a b", "ab", "a!", "}", "~",
           "\x7f", "é", "z", "zz", "€", "😀", "HOSTILE key\n"]


def test_escaping_keeps_byte_order_and_round_trips():
    for a in SAMPLES:
        ea = g.escape(a)
        assert g.SEPARATOR not in ea
        assert all(0x21 <= ord(c) <= 0x7E for c in ea)
        assert g.unescape(ea) == a
        for b in SAMPLES:
            assert (a.encode() < b.encode()) == (ea < g.escape(b)), (a, b)
    assert g.unescape("a b") is None
    assert g.unescape("#G0") is None


def test_composites_sort_part_by_part():
    assert g.composite(5, "a") < g.composite(5, "ab") < g.composite(5, "b") < g.composite(6, "a")
    assert g.composite("a", "z") < g.composite("ab", "a")
    with pytest.raises(ValueError):
        g.composite("x" * 257)
    assert g.composite("x" * 256)


def test_subject_and_deadline():
    ctx = SimpleNamespace(principal=SimpleNamespace(subject="alice"), deadline_ms=1500)
    assert g.require_subject(ctx, lambda: RuntimeError("no")) == "alice"
    for nobody in [SimpleNamespace(principal=None, deadline_ms=0),
                   SimpleNamespace(principal=SimpleNamespace(subject=None), deadline_ms=0)]:
        assert g.subject_of(nobody) is None
        with pytest.raises(RuntimeError):
            g.require_subject(nobody, lambda: RuntimeError("refused"))
    assert g.remaining_ms(ctx, now_ms=1000) == 500
    assert g.remaining_ms(ctx, now_ms=2000) == 0
