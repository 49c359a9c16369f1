"""The documented cluster deployment (deploy/): the compose file is well-formed, every groundstate command in it is
one the command line accepts, the pieces point at each other, and its configuration passes the schema."""

from __future__ import annotations

import shlex
import tomllib
from pathlib import Path
from typing import Any

import click
import pytest
import typer
import yaml

from groundstate.cli import app
from groundstate.config import ProjectConfig

DEPLOY = Path(__file__).parents[2] / "deploy"


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text(encoding="utf-8"))
    return loaded


def parsed(arguments: list[str]) -> click.Context:
    """The arguments parsed by the real ``groundstate`` command line (nothing runs): UsageError if they are wrong."""
    command: Any = typer.main.get_command(app)
    context = command.make_context("groundstate", list(arguments[:1]), resilient_parsing=True)
    sub = command.get_command(context, arguments[0])
    assert sub is not None, f"no command {arguments[0]!r}"
    return sub.make_context(arguments[0], list(arguments[1:]))  # type: ignore[no-any-return]


def test_the_compose_file_has_the_documented_services() -> None:
    services = compose()["services"]
    assert set(services) == {"postgres", "ray-head", "worker", "console"}
    for name in ("ray-head", "worker", "console"):
        service = services[name]
        assert service["image"] == "groundstate:latest" and service["build"]["dockerfile"] == "deploy/Dockerfile"
        assert "runs:/shared/runs" in service["volumes"]  # the same runs directory everywhere
        assert service["environment"]["GROUNDSTATE_CONFIG"] == "/etc/groundstate/groundstate.toml"
    declared = set(compose()["volumes"])
    used = {v.split(":")[0] for s in services.values() for v in s.get("volumes", []) if not v.startswith(".")}
    assert used <= declared
    assert (DEPLOY / services["worker"]["build"]["dockerfile"].removeprefix("deploy/")).is_file()


def command_of(service: dict[str, Any]) -> list[str]:
    """A service's command as argv: a ``sh -c "exec ..."`` one split as the shell would (its ``$$(hostname -i)``
    stands for the container's address on the compose network)."""
    command: list[str] = service["command"]
    if command[:2] == ["sh", "-c"]:
        assert command[2].startswith("exec ")
        return shlex.split(command[2].removeprefix("exec ").replace("$$(hostname -i)", "172.18.0.5"))
    return command


def test_every_groundstate_command_in_it_parses_and_they_point_at_the_head() -> None:
    services = compose()["services"]
    head = command_of(services["ray-head"])
    assert head[:3] == ["ray", "start", "--head"]
    assert head[head.index("--node-ip-address") + 1] == "172.18.0.5"  # its own address, not every interface
    address = f"ray-head:{head[head.index('--port') + 1]}"
    worker = parsed(command_of(services["worker"])[1:])
    assert worker.params["address"] == address and worker.params["slots"] == 8
    assert worker.params["node_ip"] == "172.18.0.5"
    console = parsed(services["console"]["command"][1:])
    assert console.params["executor"] == f"ray://{address}"
    port = str(console.params["port"])
    assert services["console"]["ports"] == [f"127.0.0.1:{port}:{port}"]  # the host's loopback only


def test_nothing_secret_is_fixed_in_it() -> None:
    """The database password comes from the operator's environment (compose refuses to start without it), and the
    store URL that carries it is not in the shared configuration file."""
    services = compose()["services"]
    assert services["postgres"]["environment"]["POSTGRES_PASSWORD"].startswith("${GROUNDSTATE_DB_PASSWORD:?")
    assert "${GROUNDSTATE_DB_PASSWORD:?" in services["console"]["environment"]["GROUNDSTATE_DB"]
    settings = ProjectConfig.model_validate(tomllib.loads((DEPLOY / "groundstate.toml").read_text(encoding="utf-8")))
    assert settings.store.url is None
    assert "state:/state" in services["console"]["volumes"]  # the token stays in a volume, not the log


def test_a_wrong_command_in_it_would_be_caught() -> None:
    with pytest.raises(Exception, match="--adress") as caught:  # typer's own click: its NoSuchOption
        parsed(["worker", "--adress", "ray-head:6379"])
    assert type(caught.value).__name__ == "NoSuchOption"


def test_its_configuration_passes_the_schema_and_uses_the_cluster() -> None:
    settings = ProjectConfig.model_validate(tomllib.loads((DEPLOY / "groundstate.toml").read_text(encoding="utf-8")))
    store = compose()["x-groundstate"]["environment"]["GROUNDSTATE_DB"]
    assert store.startswith("postgresql+psycopg://") and store.split("@")[1].startswith("postgres:")  # the service
    assert settings.executor.address == "ray://ray-head:6379"
    assert settings.executor.runs_dir == Path("/shared/runs")
