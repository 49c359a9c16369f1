"""The drift linter: policy, router table and virtual store must describe the same actions.

Checks every action the policy can derive (``next_action/4`` heads, the facts that feed their action position,
and — when requests feed next_action — every ``known_action``) against ``route/2`` and the store's executors:

- ``missing-route``: an action the policy can derive has no route (error);
- ``missing-executor``: a route names an executor the virtual store does not have (error);
- ``dead-executor``: an executor no derivable action reaches (error);
- ``alias-drift``: an alias with a route of its own, pointing at an unknown action or at another alias (error);
- ``ambiguous-route``: an action with several routes, or an alias of several actions (error) — the router would
  take none of them (``route_ambiguous`` in policy.mg);
- ``unused-route``: a route for an action nothing derives or knows (warning);
- ``model-writable-decides``: a decision (what runs, whether it is permitted, where it goes) depends, through any
  chain of rules, positively or under negation, on a predicate a control packet may assert (error) — a model
  must never be able to request, permit or route an action by stating a fact.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..logic import Atom, Const, Name, Var
from .kernel import Kernel

ERROR, WARNING = "error", "warning"
ACTION_POSITION = 1  # next_action(Source, ActionType, Target, Payload)


@dataclass(frozen=True)
class Finding:
    """One lint finding: its severity, the check that found it, where, and what is wrong."""

    level: str
    code: str
    message: str

    def __str__(self) -> str:
        return f"{self.level}: {self.code}: {self.message}"


def derivable_actions(kernel: Kernel) -> dict[str, str]:
    """Action type → where the policy derives it from."""
    found: dict[str, str] = {}
    facts = kernel.engine.analyzed.facts
    for rule in kernel.engine.analyzed.rules:
        head = rule.head
        if head.predicate != "next_action":
            continue
        where = f"{head.pos.source}:{head.pos.line}"
        term = head.args[ACTION_POSITION]
        if isinstance(term, Const) and isinstance(term.value, Name):
            found.setdefault(str(term.value), where)
            continue
        if not isinstance(term, Var):
            continue
        for literal in rule.body:
            if not isinstance(literal, Atom):
                continue
            positions = [i for i, arg in enumerate(literal.args) if isinstance(arg, Var) and arg.name == term.name]
            if literal.predicate == "requested_action":
                for (action,) in kernel.query("known_action(A)"):
                    found.setdefault(str(action), f"{where} (any known_action may be requested)")
                for alias, _ in kernel.query("action_alias(A, T)"):
                    found.setdefault(str(alias), f"{where} (aliases may be requested)")
            for position in positions:
                for row, _ in facts.get(literal.predicate, []):
                    found.setdefault(str(row[position]), f"{where} via {literal.predicate}")
    return found


DECISIONS = ("next_action", "requested_action", "permission_check_result", "denied", "requires_user_approval",
             "user_approved", "route_for", "awaiting_routing", "action_permitted", "resolved_action", "chosen_route",
             "routing_problem", "final_decision", "settled")  # fmt: skip


def model_influence(kernel: Kernel) -> dict[str, str]:
    """Decision predicates that depend on a model-writable predicate → the model-writable predicate."""
    writable = kernel.model_writable()
    depends: dict[str, set[str]] = {}
    for rule in kernel.engine.analyzed.rules:
        body = {lit.predicate for lit in rule.body if hasattr(lit, "predicate")}
        body |= {lit.atom.predicate for lit in rule.body if hasattr(lit, "atom")}
        depends.setdefault(rule.head.predicate, set()).update(body)
    found: dict[str, str] = {}
    for decision in DECISIONS:
        seen, stack = set(), [decision]
        while stack:
            predicate = stack.pop()
            if predicate in seen:
                continue
            seen.add(predicate)
            if predicate in writable:
                found[decision] = predicate
                break
            stack.extend(depends.get(predicate, ()))
    return found


def lint(kernel: Kernel, executors: Iterable[str]) -> list[Finding]:
    """Every finding about the kernel's policy, route table and the store's executors (one check per helper)."""
    routes: dict[str, list[str]] = {}
    for action, executor in kernel.query("route(A, E)"):
        routes.setdefault(str(action), []).append(str(executor).lstrip("/"))
    alias_rows = [(str(alias), str(target)) for alias, target in kernel.query("action_alias(A, T)")]
    aliases = dict(alias_rows)
    known = {str(row[0]) for row in kernel.query("known_action(A)")}
    return [
        *_model_writable_findings(kernel),
        *_ambiguity_findings(routes, alias_rows),
        *_alias_findings(routes, aliases, known),
        *_route_findings(derivable_actions(kernel), routes, aliases, known, set(executors), _routed_by_rules(kernel)),
    ]


def _model_writable_findings(kernel: Kernel) -> list[Finding]:
    return [Finding(ERROR, "model-writable-decides", f"{decision} depends on {writable}, which a control packet's "
                    "mangle_updates may assert: a model could steer the decision")
            for decision, writable in sorted(model_influence(kernel).items())]  # fmt: skip


def _ambiguity_findings(routes: dict[str, list[str]], alias_rows: list[tuple[str, str]]) -> list[Finding]:
    found = [Finding(ERROR, "ambiguous-route", f"{action} has several routes ({', '.join(sorted(set(targets)))}): "
                     "the router takes none")
             for action, targets in sorted(routes.items()) if len(set(targets)) > 1]  # fmt: skip
    for alias in sorted({a for a, _ in alias_rows}):
        targets = sorted({t for a, t in alias_rows if a == alias})
        if len(targets) > 1:
            found.append(
                Finding(ERROR, "ambiguous-route", f"{alias} is an alias of several actions ({', '.join(targets)})")
            )
    return found


def _alias_findings(routes: dict[str, list[str]], aliases: dict[str, str], known: set[str]) -> list[Finding]:
    found = []
    for alias, target in sorted(aliases.items()):
        if alias in routes:
            found.append(Finding(ERROR, "alias-drift", f"{alias} is an alias of {target} but has its own route"))
        if target in aliases:
            found.append(Finding(ERROR, "alias-drift", f"{alias} points at {target}, which is itself an alias"))
        elif target not in known:
            found.append(Finding(ERROR, "alias-drift", f"{alias} points at {target}, which is not a known_action"))
    return found


def _route_findings(
    actions: dict[str, str],
    routes: dict[str, list[str]],
    aliases: dict[str, str],
    known: set[str],
    executors: set[str],
    reported: frozenset[str] | set[str] = frozenset(),
) -> list[Finding]:
    found, reached = [], set()
    for action, where in sorted(actions.items()):
        canonical = aliases.get(action, action)
        if canonical not in routes:
            found.append(Finding(ERROR, "missing-route", f"{action} (derived at {where}) has no route"))
            continue
        reached.update(routes[canonical])
    for action, targets in sorted(routes.items()):
        found += [Finding(ERROR, "missing-executor", f"route({action}, /{executor}): the store has no {executor}")
                  for executor in targets if executor not in executors]  # fmt: skip
        if action not in actions and action not in known:
            found.append(Finding(WARNING, "unused-route", f"{action} has a route but nothing derives it"))
    found += [Finding(ERROR, "dead-executor", f"the executor {executor} is reached by no derivable action")
              for executor in sorted(executors - reached - reported)]  # fmt: skip
    return found


def _routed_by_rules(kernel: Kernel) -> set[str]:
    """Executors a route *rule* names (``route(T, /python_tool) :- python_tool(T).``): their actions are reported
    by the runtime when a run starts (its registered Python tools), so no fact names them here."""
    named = set()
    for rule in kernel.engine.analyzed.rules:
        if rule.head.predicate == "route" and isinstance(rule.head.args[1], Const):
            named.add(str(rule.head.args[1].value).lstrip("/"))
    return named
