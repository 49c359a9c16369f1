"""The project configuration: found where the docs say, every problem named with file, line and key, and
``config show`` printing where each value came from."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from groundstate.config import ConfigFileError, effective, find_config, load_config, trust

GOOD = """\
[models]
default = "openai-chat:main@http://127.0.0.1:9"

[models.roles]
writer_ = "openai-chat:w@http://127.0.0.1:9"

[limits.core_limits]
max_facts_in_kernel = 1000

[limits.shard_profiles.writer]
max_execution_time_sec = 5
"""


def groundstate(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "GROUNDSTATE_CONFIG"} | {"COLUMNS": "200"} | (env or {})
    return subprocess.run([sys.executable, "-m", "groundstate", *args], capture_output=True, text=True, cwd=cwd,
                          env=environment, timeout=120)  # fmt: skip


def test_show_gives_each_value_and_where_it_came_from(tmp_path: Path) -> None:
    (tmp_path / "groundstate.toml").write_text(GOOD)
    done = groundstate("config", "show", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert f'models.roles.writer_ = "openai-chat:w@http://127.0.0.1:9"  # {tmp_path / "groundstate.toml"}:5' in lines
    assert f"limits.core_limits.max_facts_in_kernel = 1000  # {tmp_path / 'groundstate.toml'}:8" in lines
    assert "limits.core_limits.max_action_log = 500  # default" in lines
    assert f"limits.shard_profiles.writer.max_execution_time_sec = 5.0  # {tmp_path / 'groundstate.toml'}:11" in lines


def test_every_problem_names_file_line_and_key(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("[models]\ndefualt = 'local'\n\n[limits.core_limits]\nmax_facts_in_kernel = -1\n")
    with pytest.raises(ConfigFileError) as caught:
        load_config(path)
    assert str(caught.value).splitlines() == [
        f"{path}:2: models.defualt: Extra inputs are not permitted",
        f"{path}:5: limits.core_limits.max_facts_in_kernel: Input should be greater than 0",
    ]
    done = groundstate("config", "check", "--config", str(path), cwd=tmp_path)
    assert done.returncode == 2 and "models.defualt" in done.stderr and "Traceback" not in done.stderr
    path.write_text("[models\n")
    with pytest.raises(ConfigFileError, match=r"bad.toml: not valid TOML: .*line 1"):
        load_config(path)


def test_a_missing_policy_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "g.toml"
    path.write_text("[policy]\nguards = ['mine.mg']\n")
    with pytest.raises(ConfigFileError, match=r"g.toml:2: policy.guards: no such file .*mine.mg"):
        load_config(path)
    (tmp_path / "mine.mg").write_text("")
    assert load_config(path).config.policy.guards == [tmp_path / "mine.mg"]  # relative to the file


def test_where_the_configuration_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GROUNDSTATE_CONFIG", raising=False)
    monkeypatch.setenv("GROUNDSTATE_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    assert find_config() is None and effective(load_config())[0][2] == "default"
    (tmp_path / "groundstate.toml").write_text(GOOD)
    assert load_config().path is None  # found, but nobody trusted it: data, not configuration
    assert load_config(untrusted=True).path == tmp_path / "groundstate.toml"  # what config show/check read
    trust(tmp_path / "groundstate.toml")
    assert load_config().path == tmp_path / "groundstate.toml"
    (tmp_path / "groundstate.toml").write_text(GOOD + "\n[budgets]\nmax_tokens = 5\n")  # changed: trust withdrawn
    assert load_config().path is None
    other = tmp_path / "other.toml"
    other.write_text("[models]\ndefault = 'local'\n")
    monkeypatch.setenv("GROUNDSTATE_CONFIG", str(other))
    assert find_config() == other and load_config().config.models.default == "local"
    explicit = tmp_path / "explicit.toml"
    explicit.write_text("")
    assert find_config(explicit) == explicit
    with pytest.raises(ConfigFileError, match="no such configuration file"):
        find_config(tmp_path / "missing.toml")


def test_the_store_url_may_come_from_the_environment(tmp_path: Path) -> None:
    """``GROUNDSTATE_DB`` names the store (so a password need not sit in a file); ``--db`` still wins."""
    from_env, from_option = tmp_path / "env.db", tmp_path / "option.db"
    env = {"GROUNDSTATE_HOME": str(tmp_path / "home"), "GROUNDSTATE_DB": f"sqlite:///{from_env}"}
    assert groundstate("runs", "list", cwd=tmp_path, env=env).returncode == 0
    assert from_env.exists() and not (tmp_path / "home" / "groundstate.db").exists()
    assert groundstate("runs", "list", "--db", f"sqlite:///{from_option}", cwd=tmp_path, env=env).returncode == 0
    assert from_option.exists()


def test_an_mcp_server_named_python_is_refused_at_its_own_line(tmp_path: Path) -> None:
    path = tmp_path / "groundstate.toml"
    path.write_text('[mcp]\napproval_timeout_sec = 5\n\n[mcp.servers.time]\ncommand = ["x"]\n'
                    '[mcp.servers.python]\ncommand = ["y"]\n')  # fmt: skip
    done = groundstate("config", "check", "--config", str(path), cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip() == (f"error: {path}:6: mcp.servers.python: the guard lists your own Python tools "
                                   "([tools]) under that name; give the server another one")  # fmt: skip


def test_check_refuses_what_the_commands_would_refuse_naming_each(tmp_path: Path) -> None:
    """`config check` is the truth: a model spec no backend can be built from, a shipped guard that does not exist,
    a rule file that does not parse — each named with the configuration's line and key (and the rule file's own
    line), exit 2; what `run` or `mcp serve` would refuse is never a surprise later."""
    (tmp_path / "bad.mg").write_text("x(A) :- y(A.\n")
    path = tmp_path / "groundstate.toml"
    path.write_text('[models]\ndefault = "openai-chat:gpt@ftp://x"\n[policy]\ndisable_guards = ["no_such_guard"]\n'
                    'kernel = ["bad.mg"]\n[mcp]\npolicy = ["bad.mg"]\n')  # fmt: skip
    done = groundstate("config", "check", "--config", str(path), cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert errors[0] == (f"error: {path}:2: models.default: model 'openai-chat:gpt@ftp://x': its URL must be "
                         "http(s)://HOST[:PORT][/PATH] with a port of digits and no spaces or control "
                         "characters")  # fmt: skip
    assert errors[1].startswith(f"error: {path}:4: policy.disable_guards: no_such_guard: no shipped breaker has that "
                                "name")  # fmt: skip
    assert errors[2].startswith(f"error: {path}:5: policy.kernel: ") and "bad.mg:1:12" in errors[2]
    assert errors[3].startswith(f"error: {path}:7: mcp.policy: ") and "bad.mg:1:12" in errors[3]
    path.write_text('[models]\ndefault = "local"\n')
    assert groundstate("config", "check", "--config", str(path), cwd=tmp_path).returncode == 0
