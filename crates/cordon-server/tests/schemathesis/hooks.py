"""Schemathesis hooks for cordon's API tests: generated job submissions act for the project
the test's token belongs to (any other project is refused with 403 before the request's
contents are looked at, which would keep the fuzzer at the door)."""

import os

import schemathesis

PROJECT = os.environ["CORDON_SCHEMATHESIS_PROJECT"]


@schemathesis.hook
def map_body(ctx, body):
    if isinstance(body, dict) and "project" in body:
        body["project"] = PROJECT
    return body
