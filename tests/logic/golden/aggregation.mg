# Group-by over the set of distinct body rows; reducers; lets after grouping; no row for empty input.
sale(/north, /apples, 3). sale(/north, /pears, 5). sale(/south, /apples, 3). sale(/south, /figs, 4).
sale(/east, /figs, 1).
price(/apples, 1.5). price(/pears, 2.0). price(/figs, 3.0).
count_all(N) :- sale(_, _, _) |> do fn:group_by(), let N = fn:count().
count_x(N) :- sale(R, _, _) |> do fn:group_by(), let N = fn:count(R).
regions(N) :- sale(R, _, _), R != /nowhere |> do fn:group_by(), let N = fn:count().
per_region(R, N, S, Mx, Mn) :- sale(R, _, Q) |> do fn:group_by(R), let N = fn:count(), let S = fn:sum(Q),
  let Mx = fn:max(Q), let Mn = fn:min(Q).
avg_qty(A) :- sale(_, _, Q) |> do fn:group_by(), let A = fn:avg(Q).
float_stats(S, Mx, Mn) :- price(_, P) |> do fn:group_by(), let S = fn:float:sum(P), let Mx = fn:float:max(P),
  let Mn = fn:float:min(P).
items(R, L) :- sale(R, I, _) |> do fn:group_by(R), let L = fn:collect(I).
qty_pairs(L) :- sale(/north, I, Q) |> do fn:group_by(), let L = fn:collect(I, Q).
distinct_qty(L) :- sale(_, _, Q) |> do fn:group_by(), let L = fn:collect_distinct(Q).
qty_map(M) :- sale(/south, I, Q) |> do fn:group_by(), let M = fn:collect_to_map(I, Q).
scaled(R, T) :- sale(R, _, Q) |> do fn:group_by(R), let S = fn:sum(Q), let T = fn:mult(S, 10).
none(N) :- sale(/west, _, _) |> do fn:group_by(), let N = fn:count().
per_row(I, D) :- sale(_, I, Q) |> let D = fn:plus(Q, Q).
list_sum(S) :- S = fn:sum([1, 2, 3]).
list_max(M) :- M = fn:max([1, 7, 3]).
