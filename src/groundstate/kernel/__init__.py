"""groundstate.kernel — the agent kernel: Mangle policy decides, Python reports facts and obeys.

kernel = Kernel("workspace/")
shards = Shards(kernel, VirtualStore(kernel.workspace))
reports = shards.step(parse_output(model_output, kernel.update_validator()))
"""

from .config import CoreLimits, KernelConfig, ShardProfile
from .kernel import Frame, Kernel, KernelLimitError, Transaction
from .ooda import ARGUMENT_IS_PAYLOAD, ActionReport, PacketRefused, Request, Shards
from .store import VirtualStore
from .workspace import Workspace, WorkspaceError

__all__ = [
    "ARGUMENT_IS_PAYLOAD",
    "ActionReport",
    "CoreLimits",
    "Frame",
    "Kernel",
    "KernelConfig",
    "KernelLimitError",
    "PacketRefused",
    "Request",
    "ShardProfile",
    "Shards",
    "Transaction",
    "VirtualStore",
    "Workspace",
    "WorkspaceError",
]
