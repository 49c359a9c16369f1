q(1).
p(X) :- q(X) |> let X = fn:plus(X, 1).
