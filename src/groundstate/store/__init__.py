"""groundstate.store — durable state shared by every process: operator accounts (and what their roles may do), the
tool journal (exactly-once effects across crashes) and how the store's database is opened. The run store's event
log still lives in ``runtime`` (docs/architecture.md).

ops = Operators(url, first_admin_token=console_token); who = ops.authenticate(token); who.require(ACT)
"""

from .access import ACT, ADMINISTER, SEE, decision_refused, may, roles
from .audit import JOURNAL, LEDGER, StoreChain, StoreVerdict, signature_of, verify_store
from .database import (
    DriverSQL,
    Executes,
    HeldConnection,
    HotTransaction,
    NotText,
    WouldWait,
    aware,
    create_tables,
    hot_transaction,
    in_store,
    open_engine,
    printable,
    private_sqlite_file,
    reading,
    rows_apart,
    within,
)
from .holders import gone_here, parent_process, this_process
from .journal import CallInDoubt, JournalEntry, ToolJournal, call_digest
from .operators import (
    FIRST_ADMIN,
    TOKEN_ENV,
    AccountConflict,
    AccountRefused,
    BadAccountName,
    NotAuthenticated,
    NotPermitted,
    Operator,
    Operators,
    UnknownOperator,
    command_line_operator,
    token_hash,
)

__all__ = [
    "ACT",
    "ADMINISTER",
    "FIRST_ADMIN",
    "JOURNAL",
    "LEDGER",
    "SEE",
    "TOKEN_ENV",
    "AccountConflict",
    "AccountRefused",
    "BadAccountName",
    "CallInDoubt",
    "DriverSQL",
    "Executes",
    "HeldConnection",
    "HotTransaction",
    "JournalEntry",
    "NotAuthenticated",
    "NotPermitted",
    "NotText",
    "Operator",
    "Operators",
    "StoreChain",
    "StoreVerdict",
    "ToolJournal",
    "UnknownOperator",
    "WouldWait",
    "aware",
    "call_digest",
    "command_line_operator",
    "create_tables",
    "decision_refused",
    "gone_here",
    "hot_transaction",
    "in_store",
    "may",
    "open_engine",
    "parent_process",
    "printable",
    "private_sqlite_file",
    "reading",
    "roles",
    "rows_apart",
    "signature_of",
    "this_process",
    "token_hash",
    "verify_store",
    "within",
]
