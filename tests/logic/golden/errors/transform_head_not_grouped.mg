q(1, 2).
p(X, N) :- q(X, Y) |> do fn:group_by(), let N = fn:count().
