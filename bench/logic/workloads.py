"""Benchmark workloads: one abstract program and data set each, with an independently computed answer size.

Rules are kept abstract (atoms of variables and integer constants, positive or negated) so the same
program is written out in each engine's own syntax. Entities are integers so that no engine pays for
a value type the others do not have.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

Atom = tuple[str, tuple[object, ...]]  # predicate, args: "X" variables or int constants
Literal = tuple[bool, Atom]  # (negated, atom)


@dataclass
class Workload:
    name: str
    rules: list[tuple[Atom, list[Literal]]]
    facts: dict[str, list[tuple[int, ...]]]
    query: str  # the predicate whose facts are counted
    query_arity: int
    expected: int | None  # None: take clingo's count as the reference
    updates: list[tuple[str, tuple[int, ...]]] = field(default_factory=list)  # policy workload only
    update_query: str = ""


def pos(pred: str, *args: object) -> Literal:
    return (False, (pred, args))


def neg(pred: str, *args: object) -> Literal:
    return (True, (pred, args))


def head(pred: str, *args: object) -> Atom:
    return (pred, args)


def chain(n: int, right: bool) -> Workload:
    edges = [(i, i + 1) for i in range(n)]
    recursive = (
        [pos("edge", "X", "Y"), pos("path", "Y", "Z")] if right else [pos("path", "X", "Y"), pos("edge", "Y", "Z")]
    )
    rules = [(head("path", "X", "Y"), [pos("edge", "X", "Y")]), (head("path", "X", "Z"), recursive)]
    kind = "right" if right else "left"
    return Workload(f"chain-{kind} N={n}", rules, {"edge": edges}, "path", 2, n * (n + 1) // 2)


def _closure_size(edges: list[tuple[int, int]]) -> int:
    succ: dict[int, list[int]] = defaultdict(list)
    for a, b in edges:
        succ[a].append(b)
    total = 0
    for start in list(succ):
        seen: set[int] = set()
        stack = list(succ[start])
        while stack:
            node = stack.pop()
            if node not in seen:
                seen.add(node)
                stack.extend(succ.get(node, ()))
        total += len(seen)
    return total


def random_graph(nodes: int, edge_count: int, seed: int = 7) -> Workload:
    rng = random.Random(seed)
    edges = sorted({(rng.randrange(nodes), rng.randrange(nodes)) for _ in range(edge_count)})
    rules = [
        (head("path", "X", "Y"), [pos("edge", "X", "Y")]),
        (head("path", "X", "Z"), [pos("path", "X", "Y"), pos("edge", "Y", "Z")]),
    ]
    return Workload(f"random graph V={nodes} E={len(edges)}", rules, {"edge": edges}, "path", 2, _closure_size(edges))


def same_generation(depth: int, branching: int) -> Workload:
    parent: list[tuple[int, int]] = []
    level = [0]
    next_id = 1
    sizes = [1]
    for _ in range(depth):
        new_level = []
        for p in level:
            for _ in range(branching):
                parent.append((next_id, p))
                new_level.append(next_id)
                next_id += 1
        level = new_level
        sizes.append(len(level))
    nodes = [(i,) for i in range(next_id)]
    rules = [
        (head("sg", "X", "X"), [pos("node", "X")]),
        (head("sg", "X", "Y"), [pos("par", "X", "XP"), pos("sg", "XP", "YP"), pos("par", "Y", "YP")]),
    ]
    expected = sum(s * s for s in sizes)
    return Workload(
        f"same-generation depth={depth} b={branching}", rules, {"node": nodes, "par": parent}, "sg", 2, expected
    )


def _points_to(
    address: list[tuple[int, int]],
    assign: list[tuple[int, int]],
    load: list[tuple[int, int]],
    store: list[tuple[int, int]],
) -> int:
    """Andersen's analysis by a plain worklist, independent of every engine."""
    pts: dict[int, set[int]] = defaultdict(set)
    for p, a in address:
        pts[p].add(a)
    changed = True
    while changed:
        changed = False
        for p, q in assign:
            if not pts[q] <= pts[p]:
                pts[p] |= pts[q]
                changed = True
        for p, q in load:  # p = *q
            for r in list(pts[q]):
                if not pts[r] <= pts[p]:
                    pts[p] |= pts[r]
                    changed = True
        for p, q in store:  # *p = q
            for r in list(pts[p]):
                if not pts[q] <= pts[r]:
                    pts[r] |= pts[q]
                    changed = True
    return sum(len(s) for s in pts.values())


def points_to(variables: int, seed: int = 11) -> Workload:
    rng = random.Random(seed)

    def pairs(count: int) -> list[tuple[int, int]]:
        return sorted({(rng.randrange(variables), rng.randrange(variables)) for _ in range(count)})

    address, assign = pairs(variables // 2), pairs(variables)
    load, store = pairs(variables // 4), pairs(variables // 4)
    rules = [
        (head("pt", "P", "A"), [pos("address_of", "P", "A")]),
        (head("pt", "P", "A"), [pos("assign", "P", "Q"), pos("pt", "Q", "A")]),
        (head("pt", "P", "A"), [pos("load", "P", "Q"), pos("pt", "Q", "R"), pos("pt", "R", "A")]),
        (head("pt", "R", "A"), [pos("store", "P", "Q"), pos("pt", "P", "R"), pos("pt", "Q", "A")]),
    ]
    facts = {"address_of": address, "assign": assign, "load": load, "store": store}
    return Workload(f"points-to vars={variables}", rules, facts, "pt", 2, _points_to(address, assign, load, store))


# -- the policy workload: an agent kernel in the style of seed 004 -------------------------------------------------
# Constants (the seed's /names) are small integers here:
MUTATION, QUERY, REVIEW = 1, 2, 3  # intent categories
CURRENT = 0  # /current_intent
WRITE, READ, DELETE, RUN_TESTS, EXEC = 10, 11, 12, 13, 14  # action types
DELEGATE_CODER, DELEGATE_REVIEWER, ANSWER, ASK_USER, RUN_TESTS_ACTION = 20, 21, 22, 23, 24  # next actions


def policy_rules() -> list[tuple[Atom, list[Literal]]]:
    r: list[tuple[Atom, list[Literal]]] = []

    def rule(h: Atom, *body: Literal) -> None:
        r.append((h, list(body)))

    # perception: the canonical intent and what it touches
    rule(head("intent_target", "T"), pos("user_intent", CURRENT, "C", "V", "T"))
    rule(head("intent_category", "C"), pos("user_intent", CURRENT, "C", "V", "T"))
    rule(head("is_mutation"), pos("intent_category", MUTATION))
    rule(head("is_query"), pos("intent_category", QUERY))
    rule(head("is_review"), pos("intent_category", REVIEW))
    # dependency graph
    rule(head("dep", "A", "B"), pos("depends", "A", "B"))
    rule(head("dep", "A", "C"), pos("dep", "A", "B"), pos("depends", "B", "C"))
    rule(head("impacted", "P"), pos("intent_target", "T"), pos("dep", "P", "T"))
    rule(head("impacted", "T"), pos("intent_target", "T"))
    rule(head("impacted_test", "X"), pos("impacted", "P"), pos("test_for", "X", "P"))
    rule(head("untested", "P"), pos("impacted", "P"), neg("has_test", "P"))
    rule(head("has_test", "P"), pos("test_for", "_X", "P"))
    rule(head("failing_impacted", "X"), pos("impacted_test", "X"), pos("failing_test", "X"))
    # ownership
    rule(head("owner_of_target", "Team"), pos("intent_target", "T"), pos("file_owner", "T", "Team"))
    rule(
        head("user_owns_target"),
        pos("current_user", "U"),
        pos("team_member", "U", "Team"),
        pos("owner_of_target", "Team"),
    )
    rule(
        head("cross_team_impact", "P"),
        pos("impacted", "P"),
        pos("file_owner", "P", "Team"),
        neg("current_team", "Team"),
    )
    rule(head("current_team", "Team"), pos("current_user", "U"), pos("team_member", "U", "Team"))
    _constitution_rules(rule)
    return r


def _constitution_rules(rule: Callable[..., None]) -> None:
    """The second half of the policy: sensitivity, next actions, blocks and permits, routing, phases."""
    # sensitivity
    rule(head("sensitive_file", "P"), pos("file_in_dir", "P", "D"), pos("sensitive_dir", "D"))
    rule(head("touches_sensitive"), pos("impacted", "P"), pos("sensitive_file", "P"))
    rule(head("generated_file", "P"), pos("file_lang", "P", 99))
    # executive: next_action
    rule(head("next_action", DELEGATE_CODER), pos("is_mutation"), pos("user_owns_target"), neg("touches_sensitive"))
    rule(head("next_action", DELEGATE_REVIEWER), pos("is_review"))
    rule(head("next_action", DELEGATE_REVIEWER), pos("is_mutation"), pos("touches_sensitive"))
    rule(head("next_action", ASK_USER), pos("is_mutation"), neg("user_owns_target"))
    rule(head("next_action", ANSWER), pos("is_query"))
    rule(head("next_action", RUN_TESTS_ACTION), pos("is_mutation"), pos("failing_impacted", "_X"))
    rule(head("has_next_action"), pos("next_action", "_A"))
    rule(head("stuck"), pos("intent_category", "_C"), neg("has_next_action"))
    # constitution: pending actions, blocks, permits
    rule(head("action_target", "A", "P"), pos("pending_action", "A", "_T", "P"))
    rule(head("action_type", "A", "T"), pos("pending_action", "A", "T", "_P"))
    rule(head("writes", "A", "P"), pos("pending_action", "A", WRITE, "P"))
    rule(head("writes", "A", "P"), pos("pending_action", "A", DELETE, "P"))
    rule(head("blocked", "A"), pos("writes", "A", "P"), pos("sensitive_file", "P"), neg("approved", "A"))
    rule(head("blocked", "A"), pos("writes", "A", "P"), pos("generated_file", "P"))
    rule(head("blocked", "A"), pos("action_type", "A", EXEC), neg("approved", "A"))
    rule(
        head("blocked", "A"),
        pos("action_type", "A", DELETE),
        pos("action_target", "A", "P"),
        pos("has_test", "P"),
        neg("approved", "A"),
    )
    rule(head("blocked", "A"), pos("writes", "A", "P"), pos("locked", "P"))
    rule(head("locked", "P"), pos("lock", "P", "_U"), neg("lock_holder_is_user", "P"))
    rule(head("lock_holder_is_user", "P"), pos("lock", "P", "U"), pos("current_user", "U"))
    rule(head("permitted", "A"), pos("pending_action", "A", "_T", "_P"), neg("blocked", "A"))
    rule(head("needs_approval", "A"), pos("blocked", "A"), neg("approved", "A"))
    # routing
    rule(head("route", "A", 1), pos("permitted", "A"), pos("action_type", "A", READ))
    rule(head("route", "A", 2), pos("permitted", "A"), pos("action_type", "A", WRITE))
    rule(head("route", "A", 3), pos("permitted", "A"), pos("action_type", "A", RUN_TESTS))
    rule(head("route", "A", 4), pos("permitted", "A"), pos("action_type", "A", EXEC))
    rule(head("routed", "A"), pos("route", "A", "_R"))
    rule(head("unroutable", "A"), pos("permitted", "A"), neg("routed", "A"))
    # observability
    rule(head("ooda_phase", 1), pos("intent_category", "_C"), neg("has_next_action"))
    rule(head("ooda_phase", 2), pos("has_next_action"), neg("any_pending"))
    rule(head("ooda_phase", 3), pos("any_pending"))
    rule(head("any_pending"), pos("pending_action", "_A", "_T", "_P"))
    rule(head("review_needed", "P"), pos("cross_team_impact", "P"), pos("sensitive_file", "P"))


def policy(files: int = 20_000, seed: int = 5, updates: int = 200) -> Workload:
    rng = random.Random(seed)
    facts: dict[str, list[tuple[int, ...]]] = defaultdict(list)
    teams, users, dirs = 50, 500, 400
    for f in range(1, files + 1):
        facts["file_lang"].append((f, rng.choice([1, 2, 3, 99]) if rng.random() < 0.05 else rng.randrange(1, 4)))
        facts["file_owner"].append((f, rng.randrange(teams)))
        facts["file_in_dir"].append((f, rng.randrange(dirs)))
        if f > 1:
            facts["depends"].append((f, f // 4 + 1 if f // 4 + 1 < f else 1))
        if f % 2 == 0:
            facts["test_for"].append((files + f, f))
        if f % 50 == 0:
            facts["failing_test"].append((files + f,))
        if f % 100 == 0:
            facts["lock"].append((f, rng.randrange(users)))
    for u in range(users):
        facts["team_member"].append((u, rng.randrange(teams)))
    facts["sensitive_dir"] = [(d,) for d in range(0, dirs, 40)]
    facts["current_user"] = [(7,)]
    facts["user_intent"] = [(CURRENT, MUTATION, 100, 4242)]
    action_types = [WRITE, READ, DELETE, RUN_TESTS, EXEC]
    for a in range(1, 5_001):
        facts["pending_action"].append((100_000 + a, rng.choice(action_types), rng.randrange(1, files + 1)))
        if a % 3 == 0:
            facts["approved"].append((100_000 + a,))
    stream = [
        ("pending_action", (200_000 + i, rng.choice(action_types), rng.randrange(1, files + 1))) for i in range(updates)
    ]
    return Workload(
        f"policy ({sum(len(v) for v in facts.values()):,} facts)",
        policy_rules(),
        dict(facts),
        "permitted",
        1,
        None,
        updates=stream,
        update_query="permitted",
    )


def workload_factories(quick: bool = False) -> list[Callable[[], Workload]]:
    """Builders, not workloads: a worker builds only its own, so its peak memory is its own."""
    if quick:
        return [
            lambda: chain(100, False),
            lambda: chain(100, True),
            lambda: random_graph(60, 120),
            lambda: same_generation(4, 2),
            lambda: points_to(100),
            lambda: policy(files=500, updates=5),
        ]
    return [
        lambda: chain(200, False),
        lambda: chain(200, True),
        lambda: chain(1000, False),
        lambda: chain(1000, True),
        lambda: chain(2000, False),
        lambda: chain(2000, True),
        lambda: random_graph(1000, 1200),
        lambda: same_generation(9, 2),
        lambda: points_to(500),
        lambda: policy(),
    ]
