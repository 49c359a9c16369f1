"""Operator accounts: a name, a role (viewer, operator, admin — what each may do is ``access.mg``'s) and a token
kept only as its SHA-256 hash. The console, its API and the command line authenticate a token to an account, and
what they record (a decision in the event log, an approval in the guard's ledger) names that account, never a name
someone typed.

The console's first token (``console.token`` in the state directory) becomes the first admin, ``admin``, when the
store has no accounts yet; from then on it is an account like any other (rotated or removed by an admin). Tokens are
random (256 bits), so a plain hash is enough to make a stolen database useless for logging in; a token is shown once,
when it is created.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Column, DateTime, MetaData, String, Table, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from ..config import home, load_or_create_token
from ..errors import (
    AccessError,
    AuthenticationError,
    InputError,
    NotFoundError,
    PolicyError,
    StateConflict,
    StoreError,
)
from . import access
from .database import NotText, aware, create_tables, open_engine, reading

TOKEN_ENV = "GROUNDSTATE_TOKEN"  # the command line's token; unset: the state directory's console.token
FIRST_ADMIN = "admin"
NAME = re.compile(r"[a-z][a-z0-9_.-]{0,63}")

_TABLES = MetaData()
accounts = Table(
    "operators", _TABLES,
    Column("name", String(64), primary_key=True),
    Column("role", String(16), nullable=False),
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("created_by", String(64), nullable=False),
    Column("token_set_at", DateTime(timezone=True), nullable=False),
)  # fmt: skip


class NotAuthenticated(AuthenticationError, PermissionError):
    """No account has this token (a mistyped, rotated or removed token, or another store)."""


class NotPermitted(AccessError, PermissionError):
    """The account's role may not take this action (``access.mg``)."""


class AccountRefused(PolicyError, ValueError):
    """A change to the accounts that cannot apply: a bad name or role, an existing or unknown account, the last
    admin removed or demoted (each its own kind below, for its HTTP status)."""


class AccountConflict(AccountRefused, StateConflict):
    """The accounts as they are refuse the change: the name is taken, or it would leave no admin."""


class UnknownOperator(AccountRefused, NotFoundError):
    """No account has that name."""


class BadAccountName(AccountRefused, InputError):
    """A name or a role that cannot be an account's."""


@dataclass(frozen=True)
class Operator:
    """An authenticated account."""

    name: str
    role: str
    created_at: datetime
    created_by: str
    token_hash: str = field(repr=False)  # what sessions bind to: a new token ends them

    @property
    def actor(self) -> str:
        """How the event log and the ledger name this operator."""
        return f"operator:{self.name}"

    def may(self, action: str) -> bool:
        """Whether this account's role may take ``action`` (see ``access``)."""
        return access.may(self.role, action)

    def require(self, action: str) -> Operator:
        """This operator, or NotPermitted naming the role and the action."""
        if not self.may(action):
            allowed = ", ".join(sorted(role for role in access.roles() if access.may(role, action)))
            raise NotPermitted(f"operator {self.name!r} is a {self.role}: a {self.role} may not {action} "
                               f"(roles that may: {allowed})")  # fmt: skip
        return self

    def to_json(self) -> dict[str, Any]:
        """The account as the API lists it (never its token or hash)."""
        return {"name": self.name, "role": self.role, "created_at": self.created_at.isoformat(),
                "created_by": self.created_by}  # fmt: skip


def token_hash(token: str) -> str:
    """What the store keeps of a token."""
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    """A fresh random token (shown once)."""
    return "gso_" + secrets.token_urlsafe(32)


class Operators:
    """The accounts in the store's database at ``url``; ``first_admin_token``: the token that becomes ``admin`` when
    there is no account yet (the console's ``console.token``)."""

    def __init__(self, url: str, first_admin_token: str | None = None) -> None:
        self.engine = open_engine(url)
        create_tables(self.engine, accounts)
        if first_admin_token is not None:
            self._adopt_first_admin(first_admin_token)

    @classmethod
    def of_home(cls, url: str) -> Operators:
        """The accounts at ``url``, with the state directory's ``console.token`` (created if missing) as the first
        admin when there is no account yet — what every command that serves (mcp serve --http, gateway) starts
        with."""
        return cls(url, first_admin_token=load_or_create_token(home())[0])

    def authenticate(self, token: str | None) -> Operator | None:
        """The account whose token this is, or None."""
        if not token:
            return None
        with reading(self.engine) as db, _readable("the account this token names"):
            row = db.execute(select(accounts).where(accounts.c.token_hash == token_hash(token))).mappings().first()
            return None if row is None else _operator(row)

    def get(self, name: str) -> Operator | None:
        """The account called ``name``, or None."""
        with reading(self.engine) as db, _readable(f"the account {name!r}"):
            row = db.execute(select(accounts).where(accounts.c.name == name)).mappings().first()
            return None if row is None else _operator(row)

    def list(self) -> list[Operator]:
        """Every account, by name."""
        with reading(self.engine) as db, _readable("an account"):
            return [_operator(row) for row in db.execute(select(accounts).order_by(accounts.c.name)).mappings()]

    def add(self, name: str, role: str, by: Operator) -> tuple[Operator, str]:
        """A new account and its token (the only time the token is shown); ``by`` must be an admin."""
        by.require(access.ADMINISTER)
        _check(name, role)
        token, now = new_token(), datetime.now(UTC)
        try:
            with self.engine.begin() as db:
                db.execute(insert(accounts).values(name=name, role=role, token_hash=token_hash(token), created_at=now,
                                                   created_by=by.name, token_set_at=now))  # fmt: skip
        except IntegrityError:
            raise AccountConflict(f"there is already an operator called {name!r}") from None
        found = self.get(name)
        assert found is not None
        return found, token

    def set_role(self, name: str, role: str, by: Operator) -> Operator:
        """Change an account's role (the last admin cannot be demoted)."""
        by.require(access.ADMINISTER)
        _check(name, role)
        with self.engine.begin() as db:
            self._existing(db, name)
            db.execute(update(accounts).where(accounts.c.name == name).values(role=role))
            self._keep_an_admin(db, f"{name!r} is the last admin: make another account admin first")
        found = self.get(name)
        assert found is not None
        return found

    def rotate(self, name: str, by: Operator) -> str:
        """A new token for ``name`` (an admin's action, or the operator's own); the old one stops working."""
        if by.name != name:
            by.require(access.ADMINISTER)
        token = new_token()
        with self.engine.begin() as db:
            self._existing(db, name)
            db.execute(update(accounts).where(accounts.c.name == name).values(
                token_hash=token_hash(token), token_set_at=datetime.now(UTC)))  # fmt: skip
        return token

    def remove(self, name: str, by: Operator) -> None:
        """Remove an account (not the last admin); its token stops working at once."""
        by.require(access.ADMINISTER)
        with self.engine.begin() as db:
            self._existing(db, name)
            db.execute(delete(accounts).where(accounts.c.name == name))
            self._keep_an_admin(db, f"{name!r} is the last admin: make another account admin first")

    def _adopt_first_admin(self, token: str) -> None:
        now = datetime.now(UTC)
        try:
            with self.engine.begin() as db:
                if db.execute(select(accounts.c.name).limit(1)).first() is None:
                    row = {"name": FIRST_ADMIN, "role": "admin", "token_hash": token_hash(token), "created_at": now,
                           "created_by": "console.token", "token_set_at": now}  # fmt: skip
                    db.execute(insert(accounts).values(**row))
        except IntegrityError:
            pass  # another process adopted it first

    @staticmethod
    def _existing(db: Any, name: str) -> None:
        if db.execute(select(accounts.c.name).where(accounts.c.name == name)).first() is None:
            raise UnknownOperator(f"there is no operator called {name!r}")

    @staticmethod
    def _keep_an_admin(db: Any, message: str) -> None:
        admins = [row.name for row in db.execute(select(accounts.c.name, accounts.c.role))
                  if access.may(row.role, access.ADMINISTER)]  # fmt: skip
        if not admins:
            raise AccountConflict(message)  # the transaction rolls back


def command_line_operator(url: str, action: str) -> Operator:
    """The operator the command line acts as: the token in ``$GROUNDSTATE_TOKEN``, else the state directory's
    ``console.token`` (whoever can read that directory can read the whole store); refused unless it may ``action``."""
    token = os.environ.get(TOKEN_ENV)
    console_token = load_or_create_token(home())[0]
    operators = Operators(url, first_admin_token=console_token)
    found = operators.authenticate(token or console_token)
    if found is None:
        where = f"${TOKEN_ENV}" if token else f"{home() / 'console.token'}"
        raise NotAuthenticated(f"the token in {where} belongs to no operator account in {url}: ask an admin for one "
                               "(groundstate operators add)")  # fmt: skip
    return found.require(action)


def _check(name: str, role: str) -> None:
    if not NAME.fullmatch(name):
        raise BadAccountName(f"operator name {name!r}: use 1-64 lowercase letters, digits, '_', '.', '-', starting "
                             "with a letter")  # fmt: skip
    if role not in access.roles():
        raise BadAccountName(f"unknown role {role!r}: use one of {', '.join(sorted(access.roles()))}")


def _operator(row: Any) -> Operator:
    return Operator(row["name"], row["role"], aware(row["created_at"]), row["created_by"], row["token_hash"])


@contextmanager
def _readable(what: str) -> Iterator[None]:
    """An account's row that cannot be read — changed outside groundstate: a value of another type (a
    ``created_at`` of ``'garbage'``), bytes no UTF-8 text holds — is a StoreError naming ``what``, never a
    traceback (the console's every request reads the account first)."""
    try:
        yield
    except NotText as exc:
        raise StoreError(f"{what} cannot be read: {exc}") from None
    except (ValueError, TypeError, KeyError) as exc:
        raise StoreError(f"{what} cannot be read ({type(exc).__name__}: {exc}); the store was changed outside "
                         "groundstate") from None
