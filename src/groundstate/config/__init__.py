"""groundstate.config — the project configuration (``groundstate.toml``) and the limits it carries.

load_config(path_or_None) -> LoadedConfig(config: ProjectConfig, path, ...); render(loaded) shows every key with
where its value came from. The packages that act on a key read it from here; nothing here acts.
"""

from .effective import effective, render
from .home import TOKEN_FILE, default_db_url, home, load_or_create_token
from .limits import DEFAULT_SHARDS, ContextWindow, CoreLimits, KernelConfig, ShardProfile
from .options import CONFIG_OPTION, DB_OPTION, EXECUTOR_OPTION
from .project import (
    ENVIRONMENT,
    FILE_NAME,
    LOCAL_TOOLS_SERVER,
    ApprovalsConfig,
    Budgets,
    ConfigFileError,
    ExecutorConfig,
    GatewayConfig,
    LearnedConfig,
    LoadedConfig,
    McpConfig,
    McpServerConfig,
    MemoryConfig,
    MetricsConfig,
    Models,
    NotifyConfig,
    Policy,
    Price,
    ProjectConfig,
    RoleConfig,
    SearchConfig,
    Store,
    ToolsConfig,
    find_config,
    load_config,
)
from .trust import is_trusted, trust, untrust

__all__ = [
    "CONFIG_OPTION",
    "DB_OPTION",
    "DEFAULT_SHARDS",
    "ENVIRONMENT",
    "EXECUTOR_OPTION",
    "FILE_NAME",
    "LOCAL_TOOLS_SERVER",
    "TOKEN_FILE",
    "ApprovalsConfig",
    "Budgets",
    "ConfigFileError",
    "ContextWindow",
    "CoreLimits",
    "ExecutorConfig",
    "GatewayConfig",
    "KernelConfig",
    "LearnedConfig",
    "LoadedConfig",
    "McpConfig",
    "McpServerConfig",
    "MemoryConfig",
    "MetricsConfig",
    "Models",
    "NotifyConfig",
    "Policy",
    "Price",
    "ProjectConfig",
    "RoleConfig",
    "SearchConfig",
    "ShardProfile",
    "Store",
    "ToolsConfig",
    "default_db_url",
    "effective",
    "find_config",
    "home",
    "is_trusted",
    "load_config",
    "load_or_create_token",
    "render",
    "trust",
    "untrust",
]
