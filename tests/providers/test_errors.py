"""Error planes and retry advice from real response shapes (status, body, headers)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from groundstate.providers import classify
from groundstate.providers.errors import parse_duration, retry_after

NOW = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)


def openai_error(message: str, kind: str | None, code: str | None) -> str:
    return json.dumps({"error": {"message": message, "type": kind, "param": None, "code": code}})


def anthropic_error(kind: str, message: str) -> str:
    return json.dumps({"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_011"})


RATE_MESSAGE = (
    "Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Used 29000, "
    "Requested 2000. Please try again in 2s. You can increase your rate limit at https://platform.openai.com/account/billing."
)

CASES = [
    # provider, status, body, headers, plane, retryable, retry_after_s, code
    ("openai", 401, openai_error("Incorrect API key provided", "invalid_request_error", "invalid_api_key"), {},
     "auth", False, None, "invalid_api_key"),
    ("openai", 429, openai_error(RATE_MESSAGE, "tokens", "rate_limit_exceeded"),
     {"retry-after-ms": "1500", "x-request-id": "req_1"}, "rate", True, 1.5, "rate_limit_exceeded"),
    ("openai", 429, openai_error("Request too large for gpt-4o on tokens per min (TPM): Limit 30000, Requested 45000.",
     "tokens", "rate_limit_exceeded"), {"retry-after": "1"}, "request", False, None, "rate_limit_exceeded"),
    ("openai", 429, openai_error("You exceeded your current quota, please check your plan and billing details.",
     "insufficient_quota", "insufficient_quota"), {}, "quota", False, None, "insufficient_quota"),
    ("openai", 429, "", {}, "ambiguous", None, None, None),
    ("openai", 429, "", {"retry-after": "7"}, "ambiguous", None, 7.0, None),
    ("openai", 503, openai_error("The engine is currently overloaded, please try again later", "server_error", None),
     {}, "overload", True, None, "server_error"),
    ("openai", 503, "The engine is currently overloaded, please try again later", {}, "overload", True, None, None),
    ("openai", 500, openai_error("The server had an error", "server_error", None), {"x-should-retry": "false"},
     "server", False, None, "server_error"),
    ("azure", 400, openai_error("The response was filtered due to the prompt triggering Azure OpenAI's content "
     "management policy.", None, "content_filter"), {}, "content_filter", False, None, "content_filter"),
    ("anthropic", 400, anthropic_error("invalid_request_error", "Your credit balance is too low to access the API."),
     {}, "quota", False, None, "invalid_request_error"),
    ("anthropic", 400, anthropic_error("invalid_request_error", "messages: field required"), {},
     "request", False, None, "invalid_request_error"),
    ("anthropic", 401, anthropic_error("authentication_error", "invalid x-api-key"), {}, "auth", False, None,
     "authentication_error"),
    ("anthropic", 402, anthropic_error("billing_error", "Billing problem"), {}, "quota", False, None, "billing_error"),
    ("anthropic", 403, anthropic_error("permission_error", "not allowed"), {}, "auth", False, None, "permission_error"),
    ("anthropic", 404, anthropic_error("not_found_error", "model not found"), {}, "request", False, None,
     "not_found_error"),
    ("anthropic", 413, "<html><body>413 Request Entity Too Large</body></html>", {}, "request", False, None, None),
    ("anthropic", 429, anthropic_error("rate_limit_error", "Number of request tokens has exceeded your per-minute rate "
     "limit"), {"retry-after": "12"}, "rate", True, 12.0, "rate_limit_error"),
    ("anthropic", 429, anthropic_error("rate_limit_error", "You have reached your specified API usage limits."), {},
     "quota", False, None, "rate_limit_error"),
    ("anthropic", 500, anthropic_error("api_error", "Internal server error"), {}, "server", True, None, "api_error"),
    ("anthropic", 504, anthropic_error("timeout_error", "Request timed out"), {}, "server", True, None,
     "timeout_error"),
    ("anthropic", 529, anthropic_error("overloaded_error", "Overloaded"), {"retry-after": "3"}, "overload", True, 3.0,
     "overloaded_error"),
    ("deepseek", 402, openai_error("Insufficient Balance", "unknown_error", "invalid_request_error"), {},
     "quota", False, None, "invalid_request_error"),
    ("deepseek", 422, openai_error("Invalid max_tokens value, the valid range of max_tokens is [1, 8192]",
     "invalid_request_error", "invalid_request_error"), {}, "request", False, None, "invalid_request_error"),
    ("deepseek", 503, openai_error("Server overloaded, please retry shortly", "service_unavailable_error",
     "service_unavailable"), {}, "overload", True, None, "service_unavailable"),
    ("vllm", 400, json.dumps({"object": "error", "message": "This model's maximum context length is 4096 tokens. "
     "However, you requested 5000 tokens.", "type": "BadRequestError", "param": None, "code": 400}), {},
     "request", False, None, "400"),
    ("vllm", 404, json.dumps({"object": "error", "message": "The model `x` does not exist.", "type": "NotFoundError",
     "param": None, "code": 404}), {}, "request", False, None, "404"),
    ("openrouter", 402, json.dumps({"error": {"code": 402, "message": "Insufficient credits. Add more using "
     "https://openrouter.ai/credits"}}), {}, "quota", False, None, "402"),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{c[1]}-{c[4]}-{i}" for i, c in enumerate(CASES)])
def test_http_errors(case: tuple[object, ...]) -> None:
    provider, status, body, headers, plane, retryable, delay, code = case
    record = classify(provider, status, body, headers, now=NOW)  # type: ignore[arg-type]
    assert (record.plane, record.retryable, record.retry_after_s, record.code) == (plane, retryable, delay, code)
    assert record.evidence["body"] == body


@pytest.mark.parametrize(
    ("payload", "plane", "retryable"),
    [
        ({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, "overload", True),
        ({"error": {"message": "The server had an error while processing your request.", "type": "server_error"}},
         "server", True),
        ({"type": "error", "code": "insufficient_quota", "message": "You exceeded your current quota"}, "quota", False),
        ({"object": "error", "message": "The model is overloaded", "type": "ServiceUnavailableError"},
         "overload", True),
        ({"error": {"message": "something odd happened"}}, "ambiguous", None),
        ({"object": "error", "message": "Internal server error", "type": "InternalServerError", "code": 500},
         "server", True),
        ({"error": {"code": 502, "message": "Provider returned error", "metadata": {"provider_name": "X"}}},
         "server", True),
        ({"error": {"code": 429, "message": "Provider returned error"}}, "ambiguous", None),
        ({"error": "model 'x' not found"}, "ambiguous", None),
    ],
)  # fmt: skip
def test_in_stream_errors(payload: dict[str, object], plane: str, retryable: bool | None) -> None:
    record = classify("any", None, payload)
    assert (record.plane, record.retryable) == (plane, retryable)


def test_request_id_and_evidence_headers() -> None:
    record = classify(
        "anthropic", 529, anthropic_error("overloaded_error", "Overloaded"), {"Retry-After": "2", "x-foo": "1"}
    )
    assert record.request_id == "req_011"
    assert record.evidence["headers"] == {"Retry-After": "2"}


def test_durations_and_retry_headers() -> None:
    assert parse_duration("2ms") == 0.002 and parse_duration("6m0s") == 360 and parse_duration("1h2m3.5s") == 3723.5
    assert parse_duration("soon") is None and parse_duration("5x") is None
    assert retry_after({"retry-after": "Sun, 22 Nov 2026 12:00:30 GMT"}, NOW) == 30
    assert (
        retry_after(
            {
                "x-ratelimit-remaining-tokens": "0",
                "x-ratelimit-reset-tokens": "6m0s",
                "x-ratelimit-remaining-requests": "5",
                "x-ratelimit-reset-requests": "2ms",
            }
        )
        == 360
    )
    assert retry_after({"retry-after": "never"}) is None


def test_a_record_is_bounded_where_it_is_made_into_json() -> None:
    """An upstream writes the message, the code and the headers kept as evidence: the record as published or
    printed cuts each text to 2,000 characters and stays under 16 KiB, and one nested past any bound keeps its
    classification alone. A small record is given whole."""
    from groundstate.providers import ErrorRecord

    small = ErrorRecord("rate", "openai", 429, "rate_limit", "slow down", True, 2.0, "req_1", {"body": "x"})
    assert small.to_json()["message"] == "slow down" and small.to_json()["evidence"] == {"body": "x"}

    headers = {f"x-ratelimit-{i}": "9" * 1000 for i in range(8)}
    big = classify("openai", 429, openai_error("M" * 50_000, "rate_limit", "C" * 5000), headers, now=NOW)
    published = big.to_json()
    assert published["message"] == "M" * 2000 + "… (48000 characters cut)"
    assert published["code"].startswith("C" * 2000) and len(published["code"]) < 2100
    assert published["plane"] == big.plane and len(json.dumps(published)) <= 16 * 1024

    deep: dict[str, object] = {}
    for _ in range(5000):
        deep = {"d": deep}
    nested = ErrorRecord("server", "x", 500, None, "m", True, None, None, {"nested": deep, "pad": ["p" * 1999] * 40})
    too_large = "the upstream's error record was too large to publish"
    assert nested.to_json() == {"plane": "server", "provider": "x", "status": 500, "retryable": True,
                                "retry_after_s": None, "message": too_large}
