"""The gateway as real agent frameworks use it, with their defaults: the OpenAI Agents SDK's agent loop on the
embedded model (local mode) completes a tool round trip — its second request carries the tool's result as a list of
content parts, which the local gateway reads — and non-streamed replies (what both frameworks ask for) are counted
in the metrics, tokens included, while ``GET /v1/models`` is not a model call."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import httpx
from openai import OpenAI

from ..guard.test_client_snippets import clients_python  # noqa: F401 - the fixture: the clients' own environment
from ..loopback import Reply, loopback
from .conftest import GatewayFor
from .test_gateway import scrape

AGENT = """
import asyncio, os
from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, RunHooks, Runner, function_tool
from agents.exceptions import MaxTurnsExceeded
from openai import AsyncOpenAI

calls, answers = [], []


@function_tool
def get_weather(city: str) -> str:
    \"\"\"The weather in a city.\"\"\"
    calls.append(city)
    return f"sunny in {city}"


class Counted(RunHooks):
    async def on_llm_end(self, context, agent, response) -> None:
        answers.append(len(response.output))


async def main() -> None:
    client = AsyncOpenAI(base_url=os.environ["MODEL_URL"], api_key="unused", max_retries=0)
    agent = Agent(name="weather", instructions="Answer with the tool.", tools=[get_weather],
                  model=OpenAIChatCompletionsModel(model="local", openai_client=client),
                  model_settings=ModelSettings(tool_choice="required", max_tokens=48))
    try:
        result = await Runner.run(agent, "What is the weather in Paris?", max_turns=2, hooks=Counted())
        ended = f"final output {result.final_output!r}"
    except MaxTurnsExceeded:  # the small model asked for the tool again: the round trip itself is complete
        ended = "more turns wanted"
    print(f"CALLS {len(calls)} ANSWERS {len(answers)} ENDED {ended}")


asyncio.run(main())
"""


def test_an_agents_sdk_loop_on_the_local_model_completes_a_tool_round_trip(
    gateway_for: GatewayFor, clients_python: Path, tmp_path: Path  # noqa: F811
) -> None:
    base_url, _ = gateway_for("local")
    (tmp_path / "agent.py").write_text(AGENT)
    env = {"PATH": os.environ.get("PATH", ""), "MODEL_URL": base_url, "OPENAI_AGENTS_DISABLE_TRACING": "1"}
    done = subprocess.run([str(clients_python), "agent.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ANSWERS 2 ENDED" in done.stdout and "CALLS 0" not in done.stdout, done.stdout  # the tool ran, answered


def text_parts(content: list[dict[str, Any]]) -> dict[str, Any]:
    return {"model": "local", "max_tokens": 4, "messages": [{"role": "user", "content": content}]}


def test_local_mode_reads_text_parts_and_refuses_other_parts_by_name(gateway_for: GatewayFor) -> None:
    base_url, _ = gateway_for("local")
    parts = text_parts([{"type": "text", "text": "Say "}, {"type": "text", "text": "hi."}])
    answered = httpx.post(f"{base_url}/chat/completions", json=parts, timeout=120)
    assert answered.status_code == 200 and answered.json()["usage"]["prompt_tokens"] > 0
    image = text_parts([{"type": "text", "text": "What is this?"},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}])  # fmt: skip
    refused = httpx.post(f"{base_url}/chat/completions", json=image, timeout=60)
    assert refused.status_code == 400
    assert refused.json()["error"]["message"] == ("expected a chat-completions request: messages.0.content: Value "
                                                  "error, part 1 is 'image_url': the local model reads text parts "
                                                  "only")  # fmt: skip


WHOLE = {"id": "c1", "object": "chat.completion", "created": 0, "model": "m",
         "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
         "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}}  # fmt: skip
LISTED = {"object": "list", "data": [{"id": "m", "object": "model", "created": 0, "owned_by": "x"}]}


def test_whole_replies_are_counted_and_listing_models_is_no_model_call(gateway_for: GatewayFor, tmp_path: Path) -> None:
    def respond(path: str, _headers: dict[str, str], _body: bytes) -> Reply:
        payload = LISTED if path.endswith("/models") else WHOLE
        return Reply(200, {"content-type": "application/json"}, json.dumps(payload).encode())

    with loopback(respond) as upstream:
        base_url, _ = gateway_for(upstream)
        client = OpenAI(base_url=base_url, api_key="sk-test", max_retries=0)
        assert [model.id for model in client.models.list().data] == ["m"]
        reply = client.chat.completions.with_raw_response.create(model="m", messages=[{"role": "user",
                                                                                        "content": "hi"}])  # fmt: skip
        usage = reply.parse().usage
        assert usage is not None and usage.total_tokens == 18  # relayed unchanged
        for name in ("date", "server"):  # the upstream's, once: the gateway's server adds none of its own
            assert len(reply.headers.get_list(name)) == 1, f"{name}: {reply.headers.get_list(name)}"
        token = (tmp_path / "home" / "console.token").read_text().strip()
        status, samples = scrape(base_url, token)
    assert status == 200
    model = f"openai-chat:m@{upstream.rstrip('/')}"
    calls = {labels: value for (name, labels), value in samples.items() if name == "groundstate_model_calls_total"}
    assert calls == {(("model", model), ("outcome", "ok"), ("provider", "openai-chat")): 1.0}  # not /v1/models
    tokens = {dict(labels)["direction"]: value for (name, labels), value in samples.items()
              if name == "groundstate_model_tokens_total"}  # fmt: skip
    assert tokens == {"input": 11.0, "output": 7.0}
