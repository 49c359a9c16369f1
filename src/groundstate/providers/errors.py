"""Upstream errors classified into planes, with retry advice and the raw evidence.

Planes: ``auth``, ``quota`` (billing, spend limits), ``rate`` (back off, retry), ``overload`` (retry later or
elsewhere), ``request`` (the request itself is wrong or too large: never retried), ``server``,
``content_filter``, and ``ambiguous`` when the evidence does not decide — a bare 429 without a code, an
unknown in-band error. Ambiguous errors get ``retryable=None``: the classification never invents a cause.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

from .. import safejson

MAX_ERROR_BODY = 1 << 20  # of an error reply, the bytes classified (a gateway's client gets them all, as they come)

AUTH, QUOTA, RATE, OVERLOAD, REQUEST, SERVER, CONTENT_FILTER, AMBIGUOUS = (
    "auth", "quota", "rate", "overload", "request", "server", "content_filter", "ambiguous",
)  # fmt: skip
RETRYABLE = {AUTH: False, QUOTA: False, REQUEST: False, CONTENT_FILTER: False, RATE: True, OVERLOAD: True, SERVER: True}
MAX_EVIDENCE = 2000  # characters of the raw body kept as evidence
MAX_RECORD_TEXT = 2000  # characters of each text of a record as published or printed (an upstream writes them)
MAX_RECORD_BYTES = 16 * 1024  # a published record fits one SIGIL frame, far under its payload limit
CUT_OFF = "reached the model's output-token limit and was cut off before it ended"  # one wording, whatever the path


@dataclass
class ErrorRecord:
    """A provider error, classified: category, provider, status, code, message, whether a retry may help,
    the hinted wait, and the raw details."""

    plane: str
    provider: str
    status: int | None
    code: str | None
    message: str
    retryable: bool | None
    retry_after_s: float | None
    request_id: str | None
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The record as published (SIGIL UPSTREAM_ERROR) and printed, bounded: an upstream writes the message,
        the code and the evidence, and a 70 KB message once made a frame past the payload limit (the relay failed,
        the subscribers lost the read). Each text is cut to ``MAX_RECORD_TEXT`` characters, saying how much was
        cut; a record still past ``MAX_RECORD_BYTES`` keeps only its classification."""
        try:
            whole = asdict(self)
            if len(json.dumps(whole)) <= MAX_RECORD_BYTES:
                return whole
            cut: dict[str, Any] = _cut(whole, depth=0)
            if len(json.dumps(cut)) <= MAX_RECORD_BYTES:
                return cut
        except (RecursionError, TypeError, ValueError):  # nested past what JSON encodes: its classification only
            pass
        kept = {key: getattr(self, key) for key in ("plane", "provider", "status", "retryable", "retry_after_s")}
        return kept | {"message": "the upstream's error record was too large to publish"}


def _cut(value: Any, depth: int) -> Any:
    """Texts cut to ``MAX_RECORD_TEXT``, containers to 50 items and 8 levels."""
    if isinstance(value, str) and len(value) > MAX_RECORD_TEXT:
        return value[:MAX_RECORD_TEXT] + f"… ({len(value) - MAX_RECORD_TEXT} characters cut)"
    if depth > 8:
        return "…" if isinstance(value, dict | list) else value
    if isinstance(value, dict):
        return {str(key)[:MAX_RECORD_TEXT]: _cut(item, depth + 1) for key, item in list(value.items())[:50]}
    if isinstance(value, list):
        return [_cut(item, depth + 1) for item in value[:50]]
    return value


# -- headers ---------------------------------------------------------------------------------------------
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float | None:
    """OpenAI rate-limit reset values: ``2ms``, ``1.5s``, ``6m0s``, ``1h2m3s``."""
    text = text.strip()
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * _UNIT[u] for n, u in parts)


MAX_RETRY_AFTER_S = 86_400.0  # advice beyond a day (or not a finite number) is capped: it is printed as JSON


def header_map(headers: Mapping[Any, Any]) -> dict[str, str]:
    """Header values as text, whatever a recording or a server handed over: a number becomes its string form, a
    list, object or null is dropped — never an AttributeError further down. Names keep their case."""
    out: dict[str, str] = {}
    for key, value in headers.items():
        if isinstance(value, bytes):
            value = value.decode("latin-1")
        if value is None or isinstance(value, dict | list):
            continue
        out[str(key)] = str(value)
    return out


def _lowered(headers: Mapping[Any, Any]) -> dict[str, str]:
    return {k.lower(): v for k, v in header_map(headers).items()}


def retry_after(headers: Mapping[str, str], now: datetime | None = None) -> float | None:
    """Seconds to wait, from ``retry-after-ms``, ``retry-after`` (seconds or an HTTP date) or, when a limit is
    exhausted, the ``x-ratelimit-reset-*`` durations; always finite and at most a day."""
    seconds = _retry_after(_lowered(headers), now)
    return None if seconds is None else safejson.finite(seconds, MAX_RETRY_AFTER_S)


def _retry_after(h: dict[str, str], now: datetime | None) -> float | None:
    if "retry-after-ms" in h:
        try:
            return max(0.0, float(h["retry-after-ms"]) / 1000)
        except ValueError:
            pass
    if "retry-after" in h:
        value = h["retry-after"].strip()
        try:
            return max(0.0, float(value))
        except ValueError:
            try:
                when = parsedate_to_datetime(value)
            except (TypeError, ValueError):
                when = None
            if when is not None:
                if when.tzinfo is None:
                    when = when.replace(tzinfo=UTC)
                return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())
    resets = []
    for kind in ("requests", "tokens"):
        remaining = h.get(f"x-ratelimit-remaining-{kind}")
        reset = h.get(f"x-ratelimit-reset-{kind}")
        if remaining is not None and remaining.strip() == "0" and reset is not None:
            seconds = parse_duration(reset)
            if seconds is not None:
                resets.append(seconds)
    return max(resets) if resets else None


def _should_retry(headers: Mapping[str, str]) -> bool | None:
    value = _lowered(headers).get("x-should-retry", "").strip().lower()
    return {"true": True, "false": False}.get(value)


def _request_id(headers: Mapping[str, str], body: Any) -> str | None:
    h = _lowered(headers)
    found = h.get("x-request-id") or h.get("request-id")
    if found is None and isinstance(body, dict) and isinstance(body.get("request_id"), str):
        found = body["request_id"]
    return found


# -- bodies ----------------------------------------------------------------------------------------------
def _error_object(body: Any) -> tuple[str | None, str | None, str]:
    """(type, code, message) from the error shapes providers use; Nones where absent."""
    if not isinstance(body, dict):
        return None, None, ""
    inner = body.get("error")
    if isinstance(inner, dict):
        kind, code, message = inner.get("type"), inner.get("code"), inner.get("message")
    elif isinstance(inner, str):  # {"error": "message"} (Ollama, some proxies)
        kind, code, message = None, None, inner
    else:  # flat forms: vLLM {"object": "error", "message", "type", "code"}, Responses {"type": "error", "code"}
        kind, code, message = body.get("type"), body.get("code"), body.get("message")
        if kind == "error":
            kind = None
    return _text(kind), _text(code), _text(message) or ""


def _status_code(code: str | None) -> int | None:
    """An in-band error whose code is an HTTP status (vLLM's flat form, OpenRouter) is judged by that status."""
    if code is None or len(code) != 3 or not (code.isascii() and code.isdigit()):
        return None
    return int(code) if 400 <= int(code) < 600 else None


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


_TOO_LARGE = re.compile(r"request too large|too many tokens|maximum context length|context window", re.IGNORECASE)
# no bare "billing": OpenAI rate-limit messages link to .../account/billing
_BILLING = re.compile(
    r"credit balance|insufficient[_ ]quota|exceeded your current quota|spend(ing)? limit|usage limit|billing details",
    re.IGNORECASE,
)
_OVERLOADED = re.compile(r"overloaded|over capacity|capacity", re.IGNORECASE)
_FILTER = re.compile(r"content[_ ]?filter|content management policy|safety system", re.IGNORECASE)

_TYPE_PLANES = {
    "authentication_error": AUTH,
    "invalid_api_key": AUTH,
    "permission_error": AUTH,
    "billing_error": QUOTA,
    "insufficient_quota": QUOTA,
    "credit_balance_exhausted": QUOTA,
    "rate_limit_error": RATE,
    "rate_limit_exceeded": RATE,
    "overloaded_error": OVERLOAD,
    "server_error": SERVER,
    "api_error": SERVER,
    "timeout_error": SERVER,
    "invalid_request_error": REQUEST,
    "not_found_error": REQUEST,
    "request_too_large": REQUEST,
    "content_filter": CONTENT_FILTER,
}
_STATUS_PLANES = {401: AUTH, 403: AUTH, 402: QUOTA, 400: REQUEST, 404: REQUEST, 413: REQUEST, 422: REQUEST,
                  500: SERVER, 502: SERVER, 504: SERVER, 529: OVERLOAD}  # fmt: skip


def _plane(status: int | None, kind: str | None, code: str | None, message: str) -> str:
    named = [_TYPE_PLANES[t] for t in (code, kind) if t in _TYPE_PLANES]
    if _FILTER.search(message) or CONTENT_FILTER in named:
        return CONTENT_FILTER
    if status == 402:
        return QUOTA  # Payment Required, whatever type the body names (DeepSeek: "invalid_request_error")
    if _BILLING.search(message) and (status in (None, 400, 402, 403, 429) or QUOTA in named or RATE in named):
        return QUOTA  # "credit balance is too low" arrives as a 400 invalid_request_error, spend limits as 429s
    if named and named[0] == RATE and _TOO_LARGE.search(message):
        return REQUEST  # a request larger than the limit never succeeds on retry
    if named:
        if named[0] == SERVER and _OVERLOADED.search(message):
            return OVERLOAD  # "the engine is currently overloaded" under a generic server_error type
        return named[0]
    if status == 503:
        return OVERLOAD if _OVERLOADED.search(message) else AMBIGUOUS
    if status == 429:
        return AMBIGUOUS  # a bare 429: rate limit or quota? the evidence does not say
    if status is not None and status in _STATUS_PLANES:
        return _STATUS_PLANES[status]
    if status is not None and 500 <= status < 600:
        return SERVER
    if status is None and _OVERLOADED.search(message):
        return OVERLOAD
    return AMBIGUOUS


def classify(
    provider: str,
    status: int | None,
    body: bytes | str | dict[str, Any] | None,
    headers: Mapping[str, str] | None = None,
    *,
    now: datetime | None = None,
) -> ErrorRecord:
    """Classify an HTTP error response (``status`` set) or an in-band stream error (``status`` None)."""
    headers = header_map(headers or {})
    raw = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    parsed: Any = raw
    if isinstance(raw, str):
        try:
            parsed = safejson.loads(raw)
        except ValueError:
            parsed = None
    kind, code, message = _error_object(parsed)
    if not message and isinstance(raw, str):
        message = raw.strip()[:200]
    plane = _plane(status if status is not None else _status_code(code), kind, code, message)
    retryable = RETRYABLE.get(plane)
    hinted = _should_retry(headers)
    if hinted is not None and plane not in (AUTH, QUOTA, REQUEST):
        retryable = hinted
    evidence_body = raw if isinstance(raw, str) else json.dumps(raw, default=str)
    interesting = {
        k: v
        for k, v in headers.items()
        if k.lower().startswith(("retry-after", "x-ratelimit", "x-should-retry", "x-request-id", "request-id"))
    }
    return ErrorRecord(
        plane=plane,
        provider=provider,
        status=status,
        code=code or kind,
        message=message,
        retryable=retryable,
        retry_after_s=retry_after(headers, now) if plane in (RATE, OVERLOAD, SERVER, AMBIGUOUS) else None,
        request_id=_request_id(headers, parsed),
        evidence={"body": (evidence_body or "")[:MAX_EVIDENCE], "headers": interesting, "type": kind},
    )
