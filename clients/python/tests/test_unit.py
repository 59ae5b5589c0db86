"""The pieces that need no server: the SSE framing and reading error answers."""

from __future__ import annotations

import calendar

from cordon_client import BudgetError, BusyError, ServerError, SseParser, error_from_answer, parse_retry_after
from cordon_client._core import SseMessage


def test_sse_events_split_anywhere_every_line_ending():
    text = (
        '\ufeff: keep-alive\r\nid: 1\r\nevent: state\r\ndata: {"a":1}\r\n\r\n'
        "id: 2\revent: output\rdata: line one\rdata: line two\r\r"
        'id: 3\nevent: end\ndata:{"b":2}\nretry: 10\n\n'
        "id: 4\nevent: output\ndata: never finished\n"
    )
    whole = SseParser().push(text)
    for size in range(1, 8):
        parser = SseParser()
        events = []
        for i in range(0, len(text), size):
            events += parser.push(text[i : i + size])
        assert events == whole, size
    assert whole == [
        SseMessage("1", "state", '{"a":1}'),
        SseMessage("2", "output", "line one\nline two"),
        SseMessage("3", "end", '{"b":2}'),
    ]


def test_retry_after_from_the_header_else_the_budget_document():
    now = calendar.timegm((2030, 1, 1, 12, 0, 0))
    assert parse_retry_after("7", now) == 7
    assert parse_retry_after("Tue, 01 Jan 2030 12:01:00 GMT", now) == 60
    assert parse_retry_after("soon", now) is None
    budget = (
        b'{"schema":"cordon.api-error/v1","error":"budget","message":"spent",'
        b'"resets_at":"2030-01-02T00:00:00Z"}'
    )
    from_document = error_from_answer(429, {}, budget, now)
    assert isinstance(from_document, BudgetError)
    assert from_document.retry_after == 12 * 3600
    assert error_from_answer(429, {"retry-after": "30"}, budget, now).retry_after == 30
    busy = error_from_answer(429, {}, b'{"schema":"cordon.api-error/v1","error":"busy","message":"m"}', now)
    assert isinstance(busy, BusyError) and busy.retry_after is None
    proxy = error_from_answer(502, {}, b"<html>bad gateway</html>", now)
    assert isinstance(proxy, ServerError)
    assert (proxy.code, proxy.document) == ("http_502", None)
