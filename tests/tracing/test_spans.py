"""OpenTelemetry spans with the GenAI semantic conventions' names: a run's tree (run → agent attempt → model call,
and the tool calls with their decisions) recorded in-process by the SDK's in-memory exporter; the MCP guard's
calls exported over OTLP/HTTP to a collector on loopback when ``[tracing] endpoint`` names it; nothing recorded —
and OpenTelemetry not even imported — when tracing is off."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
from mcp.client.session import ClientSession
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from groundstate import tracing
from groundstate.runtime import Runtime

from ..guard.test_mcp_guard import TIME, guarded
from ..loopback import Reply, loopback
from ..providers.test_gateway_clients import WHOLE
from ..runtime.conftest import Script, envelope
from ..runtime.test_attacks import drive


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = tracing.use(SimpleSpanProcessor(exporter), "groundstate-test")
    yield exporter
    tracing.off()
    provider.shutdown()


def test_a_run_is_a_tree_of_spans_with_genai_attributes(
    spans: InMemorySpanExporter, runtime: Runtime, model: tuple[str, Script]
) -> None:
    answers: list[object] = [envelope("Writing it.", [{"tool": "write_file", "argument": "notes.md", "content": "hi"}]),
               envelope("Done. [STATUS: SUCCESS]")]  # fmt: skip
    run_id, status = drive(runtime, model[1], answers)
    assert status == "completed"
    finished: list[Any] = list(spans.get_finished_spans())
    by_id = {span.context.span_id: span for span in finished}
    [run] = [span for span in finished if span.name == "run"]
    assert run.attributes["groundstate.run.id"] == run_id and run.attributes["groundstate.status"] == "completed"
    assert run.parent is None and run.resource.attributes["service.name"] == "groundstate-test"
    [agent] = [span for span in finished if span.name == "invoke_agent writer_x"]
    assert agent.parent.span_id == run.context.span_id
    assert agent.attributes["gen_ai.operation.name"] == "invoke_agent" and agent.attributes["gen_ai.agent.name"] == (
        "writer_x")  # fmt: skip
    chats = [span for span in finished if span.attributes.get("gen_ai.operation.name") == "chat"]
    assert len(chats) == 2 and all(chat.parent.span_id == agent.context.span_id for chat in chats)
    assert chats[0].attributes["gen_ai.request.model"].startswith("openai-chat:scripted@")
    assert chats[0].attributes["groundstate.prompt_chars"] > 0 and "gen_ai.usage.input_tokens" in chats[0].attributes
    [decided] = [span for span in finished if span.name == "decide write_file"]
    assert decided.parent.span_id == agent.context.span_id and decided.attributes["groundstate.decision"] == "continue"
    [tool] = [span for span in finished if span.name == "execute_tool write_file"]
    batch = by_id[tool.parent.span_id]
    assert batch.name == "execute_tool" and batch.parent.span_id == agent.context.span_id
    assert tool.attributes["gen_ai.tool.name"] == "write_file" and tool.attributes["groundstate.status"] == "/success"
    assert tool.attributes["groundstate.decision"] == "/permit"


class Collector(BaseHTTPRequestHandler):
    """An OTLP/HTTP collector on loopback: every exported request's spans, decoded with the protocol's own types."""

    received: ClassVar[list[Any]] = []

    def do_POST(self) -> None:
        request = ExportTraceServiceRequest()
        request.ParseFromString(self.rfile.read(int(self.headers["Content-Length"])))
        Collector.received.extend(span for resource in request.resource_spans for scope in resource.scope_spans
                                  for span in scope.spans)  # fmt: skip
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_: Any) -> None:
        pass


def test_the_guards_calls_are_exported_over_otlp(tmp_path: Path) -> None:
    collector = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=collector.serve_forever, daemon=True).start()
    Collector.received = []
    endpoint = f"http://127.0.0.1:{collector.server_address[1]}/v1/traces"
    (tmp_path / "mine.mg").write_text('mcp_denied(C, "no questions about Pyongyang") :- '
                                      'mcp_argument(C, "timezone", "Asia/Pyongyang").\n')  # fmt: skip
    config = TIME + f'[mcp]\npolicy = ["mine.mg"]\n[tracing]\nendpoint = "{endpoint}"\nservice_name = "guard-test"\n'

    async def use(client: ClientSession) -> None:
        await client.call_tool("time__get_current_time", {"timezone": "UTC"})
        await client.call_tool("time__get_current_time", {"timezone": "Asia/Pyongyang"})

    try:
        guarded(tmp_path, config, use)  # the guard exports its last batch as it exits
    finally:
        collector.shutdown()
    calls = [span for span in Collector.received if span.name == "tools/call time__get_current_time"]
    decides = [span for span in Collector.received if span.name == "decide"]
    assert len(calls) == 2 and len(decides) == 2
    attributes = [{a.key: a.value.string_value for a in span.attributes} for span in calls]
    assert [a["groundstate.decision"] for a in attributes] == ["permit", "deny"]
    assert all(a["mcp.method.name"] == "tools/call" and a["gen_ai.tool.name"] == "time__get_current_time"
               for a in attributes)  # fmt: skip
    assert {span.parent_span_id for span in decides} == {span.span_id for span in calls}  # each decision in its call


def test_off_means_nothing_recorded_and_opentelemetry_not_imported(tmp_path: Path) -> None:
    code = ("import sys; from groundstate import tracing\n"
            "with tracing.span('x', {'a': 1}) as s: tracing.note(s, b=2)\n"
            "assert s is None and not tracing.enabled()\n"
            "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_configured_endpoint_without_the_sdk_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter", None)
    with pytest.raises(tracing.TracingUnavailable, match=r"pip install 'groundstate\[tracing\]'"):
        tracing.configure("http://127.0.0.1:4318/v1/traces")
    assert not tracing.enabled()
    asyncio.run(asyncio.sleep(0))


def test_the_gateways_model_calls_are_exported_with_their_usage(tmp_path: Path, gateway_for: Any) -> None:
    collector = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=collector.serve_forever, daemon=True).start()
    Collector.received = []
    (tmp_path / "gw.toml").write_text(f'[tracing]\nendpoint = "http://127.0.0.1:{collector.server_address[1]}'
                                      '/v1/traces"\n')  # fmt: skip

    def respond(path: str, _headers: dict[str, str], _body: bytes) -> Reply:
        return Reply(200, {"content-type": "application/json"}, json.dumps(WHOLE).encode())

    try:
        with loopback(respond) as upstream:
            base_url, _ = gateway_for(upstream, "--config", str(tmp_path / "gw.toml"))
            reply = httpx.post(f"{base_url}/chat/completions", json={"model": "m", "messages": [
                {"role": "user", "content": "hi"}]}, timeout=30)  # fmt: skip
            assert reply.status_code == 200
            for process in gateway_for.processes:  # the gateway exports its last batch as it stops
                process.terminate()
                process.wait(timeout=30)
    finally:
        collector.shutdown()
    [chat] = [span for span in Collector.received if span.name == "chat /v1/chat/completions"]
    attributes = {a.key: a.value for a in chat.attributes}
    assert attributes["gen_ai.operation.name"].string_value == "chat"
    assert attributes["gen_ai.request.model"].string_value.startswith("openai-chat:m@")
    assert (attributes["gen_ai.usage.input_tokens"].int_value, attributes["gen_ai.usage.output_tokens"].int_value) == (
        11, 7)  # fmt: skip
