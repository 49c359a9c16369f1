"""Traces the ecosystem reads: OpenTelemetry spans for a run (run → agent attempt → model call → tool call →
decision), the MCP guard's calls and the gateway's relayed requests, with the GenAI semantic conventions'
attribute names where they exist (``gen_ai.operation.name``, ``gen_ai.request.model``, ``gen_ai.usage.*``,
``gen_ai.tool.name``, ``gen_ai.agent.name``; the MCP ones: ``mcp.method.name``).

Off by default, and then free: ``span`` hands back one shared do-nothing context manager without importing
OpenTelemetry at all (docs/benchmarks.md measures it). ``[tracing] endpoint`` turns it on: spans are batched and
exported over OTLP/HTTP to that collector (``pip install 'groundstate[tracing]'``). Tests install an in-process
exporter with ``use``.

What an attacker controls here: attribute values (a model names its tools, an upstream counts its tokens). They are
values of spans, bounded by the SDK's attribute limits; nothing read from a span decides anything.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from .errors import ConfigurationError

_tracer: Any = None  # the OpenTelemetry tracer once tracing is on; None: off
_provider: Any = None  # its tracer provider (what ``flush`` empties)
_OFF = contextlib.nullcontext(None)
Attributes = Mapping[str, str | int | float | bool]


class TracingUnavailable(ConfigurationError):
    """``[tracing] endpoint`` is set but the OpenTelemetry SDK and its OTLP exporter are not installed."""


def enabled() -> bool:
    """Whether spans are being recorded."""
    return _tracer is not None


def span(name: str, attributes: Attributes | None = None, kind: str = "internal") -> Any:
    """A context manager for one span (the current span its parent) — or, with tracing off, a shared one that does
    nothing. Inside, ``note(s, ...)`` adds attributes known only at the end (tokens, the decision)."""
    if _tracer is None:
        return _OFF
    return _recording(name, attributes, kind)


@contextlib.contextmanager
def _recording(name: str, attributes: Attributes | None, kind: str) -> Iterator[Any]:
    from opentelemetry.trace import SpanKind, Status, StatusCode

    kinds = {"internal": SpanKind.INTERNAL, "server": SpanKind.SERVER, "client": SpanKind.CLIENT}
    with _tracer.start_as_current_span(name, kind=kinds[kind], attributes=dict(attributes or {}),
                                       record_exception=True, set_status_on_exception=False) as current:  # fmt: skip
        try:
            yield current
        except BaseException as exc:
            current.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}"))
            raise


def current() -> Any:
    """The span being recorded now (to ``note`` on from deeper down), or None with tracing off."""
    if _tracer is None:
        return None
    from opentelemetry import trace

    return trace.get_current_span()


def note(current: Any, **attributes: str | int | float | bool | None) -> None:
    """Add attributes to ``current`` (what ``span`` gave; None with tracing off: nothing happens). Keys use ``__``
    for ``.``: ``note(s, gen_ai__usage__input_tokens=12)``."""
    if current is None:
        return
    for key, value in attributes.items():
        if value is not None:
            current.set_attribute(key.replace("__", "."), value)


def configure(endpoint: str | None, service: str = "groundstate") -> None:
    """Turn tracing on, exporting to the OTLP/HTTP collector at ``endpoint`` (``http://host:4318/v1/traces``);
    None leaves it off."""
    if endpoint is None:
        return
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        raise TracingUnavailable("tracing.endpoint is set but OpenTelemetry's SDK is not installed: "
                                 "pip install 'groundstate[tracing]'") from None  # fmt: skip
    import atexit

    use(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)), service)
    atexit.register(flush)  # the last batch is exported before the process ends (servers flush on their shutdown:
    # uvicorn ends a SIGTERM'd process by the signal again, past atexit)


def flush() -> None:
    """Export every span recorded so far (a server's shutdown; the process's exit)."""
    if _provider is not None:
        _provider.force_flush()


def use(processor: Any, service: str = "groundstate") -> Any:
    """Record spans into ``processor`` (an OpenTelemetry SDK span processor); returns the tracer provider (whose
    ``shutdown`` flushes). The exporter of ``configure``, or a test's in-memory one."""
    global _tracer, _provider
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(processor)
    _tracer, _provider = provider.get_tracer("groundstate"), provider
    return provider


def off() -> None:
    """Stop recording (tests)."""
    global _tracer, _provider
    _tracer = _provider = None
