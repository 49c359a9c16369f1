q(1).
p(Y) :- q(X) |> let Y = fn:plus(X, Z).
