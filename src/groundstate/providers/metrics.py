"""Prometheus counters for model calls, shared by everything that talks to providers (the runtime's agents, the
gateway): calls by outcome, provider errors by kind, tokens by direction — each labelled by model and provider, so
a dashboard can tell which upstream is failing or costing what."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

from .errors import ErrorRecord


class ProviderMetrics:
    """Counters registered in ``registry`` (the caller's, so one scrape shows them beside its own)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.calls = Counter("groundstate_model_calls", "Model calls by outcome (ok, error).",
                             ["model", "provider", "outcome"], registry=registry)  # fmt: skip
        self.errors = Counter("groundstate_provider_errors", "Provider errors by plane (transport, request, ...).",
                              ["model", "provider", "plane"], registry=registry)  # fmt: skip
        self.tokens = Counter("groundstate_model_tokens", "Tokens as providers counted them (input, output).",
                              ["model", "provider", "direction"], registry=registry)  # fmt: skip

    def called(self, model: str, ok: bool) -> None:
        """Count one call of ``model`` (a spec such as ``openai-chat:gpt-4o@https://...``)."""
        self.calls.labels(model, provider_of(model), "ok" if ok else "error").inc()

    def failed(self, model: str, error: ErrorRecord | None, plane: str = "transport") -> None:
        """Count one provider error (``plane`` when there is no classified record, e.g. a timeout)."""
        self.errors.labels(model, provider_of(model), error.plane if error is not None else plane).inc()

    def used(self, model: str, input_tokens: int, output_tokens: int) -> None:
        """Count the tokens one call used."""
        self.tokens.labels(model, provider_of(model), "input").inc(input_tokens)
        self.tokens.labels(model, provider_of(model), "output").inc(output_tokens)


def provider_of(model: str) -> str:
    """The API part of a model spec: ``openai-chat:gpt-4o@https://...`` → ``openai-chat``; ``local:x`` → ``local``."""
    return model.partition(":")[0] or model
