// The pieces that need no server: the SSE framing and reading error answers.

import { test } from "node:test";
import assert from "node:assert/strict";

import { SseParser, errorFromAnswer, parseRetryAfter, BudgetError, BusyError, ServerError } from "../dist/index.js";

const headers = (h = {}) => new Headers(h);

test("SSE: events split anywhere, every line ending, comments, multi-line data", () => {
  const text =
    "\ufeff: keep-alive\r\nid: 1\r\nevent: state\r\ndata: {\"a\":1}\r\n\r\n" +
    "id: 2\revent: output\rdata: line one\rdata: line two\r\r" +
    "id: 3\nevent: end\ndata:{\"b\":2}\nretry: 10\n\n" +
    "id: 4\nevent: output\ndata: never finished\n";
  const whole = new SseParser().push(text);
  for (let size = 1; size <= 7; size++) {
    const parser = new SseParser();
    const events = [];
    for (let i = 0; i < text.length; i += size) events.push(...parser.push(text.slice(i, i + size)));
    assert.deepEqual(events, whole, `split every ${size}`);
  }
  assert.deepEqual(whole, [
    { id: "1", event: "state", data: '{"a":1}' },
    { id: "2", event: "output", data: "line one\nline two" },
    { id: "3", event: "end", data: '{"b":2}' },
  ]);
});

test("Retry-After: seconds, an HTTP date, or else the budget document's resets_at", () => {
  const now = Date.parse("2030-01-01T12:00:00Z");
  assert.equal(parseRetryAfter("7", now), 7);
  assert.equal(parseRetryAfter("Tue, 01 Jan 2030 12:01:00 GMT", now), 60);
  assert.equal(parseRetryAfter("soon", now), undefined);
  assert.equal(parseRetryAfter(null, now), undefined);

  const budget = JSON.stringify({
    schema: "cordon.api-error/v1",
    error: "budget",
    message: "the project's daily budget is spent",
    resets_at: "2030-01-02T00:00:00Z",
  });
  const fromDocument = errorFromAnswer(429, headers(), budget, now);
  assert.ok(fromDocument instanceof BudgetError);
  assert.equal(fromDocument.retryAfter, 12 * 3600);
  const fromHeader = errorFromAnswer(429, headers({ "retry-after": "30" }), budget, now);
  assert.equal(fromHeader.retryAfter, 30, "the header wins");

  const busy = errorFromAnswer(429, headers(), '{"schema":"cordon.api-error/v1","error":"busy","message":"m"}', now);
  assert.ok(busy instanceof BusyError);
  assert.equal(busy.retryAfter, undefined);

  const proxy = errorFromAnswer(502, headers(), "<html>bad gateway</html>", now);
  assert.ok(proxy instanceof ServerError);
  assert.equal(proxy.code, "http_502");
  assert.equal(proxy.document, undefined);
});
