# Every built-in predicate.
d(fn:pair(1, 2), [1, 2, 3], [], [/k: 1, /j: 2], {/f: 10, /g: 20}, /a/b, "prefix-body-suffix").
pair_parts(A, B) :- d(P, _, _, _, _, _, _), :match_pair(P, A, B).
cons_parts(H, T) :- d(_, L, _, _, _, _, _), :match_cons(L, H, T).
nil_empty() :- d(_, _, E, _, _, _, _), :match_nil(E).
nil_nonempty() :- d(_, L, _, _, _, _, _), :match_nil(L).
entries(K, V) :- d(_, _, _, M, _, _, _), :match_entry(M, K, V).
entry_j(V) :- d(_, _, _, M, _, _, _), :match_entry(M, /j, V).
field_f(V) :- d(_, _, _, _, S, _, _), :match_field(S, /f, V).
fields(F, V) :- d(_, _, _, _, S, _, _), :match_field(S, F, V).
members(X) :- d(_, L, _, _, _, _, _), :list:member(X, L).
has_two() :- d(_, L, _, _, _, _, _), :list:member(2, L).
prefix_ok() :- d(_, _, _, _, _, N, _), :match_prefix(N, /a).
prefix_not_strict() :- d(_, _, _, _, _, N, _), :match_prefix(N, /a/b).
starts() :- d(_, _, _, _, _, _, S), :string:starts_with(S, "prefix").
ends() :- d(_, _, _, _, _, _, S), :string:ends_with(S, "suffix").
contains() :- d(_, _, _, _, _, _, S), :string:contains(S, "-body-").
not_contains() :- d(_, _, _, _, _, _, S), :string:contains(S, "nope").
filtered(X) :- d(_, L, _, _, _, _, _), :list:member(X, L), :filter(fn:list:contains([1, 3], X)).
near(X) :- d(_, L, _, _, _, _, _), :list:member(X, L), :within_distance(X, 2, 0).
near_float() :- d(_, _, _, _, _, _, _), :within_distance(1.0, 1.5, 0.5).
