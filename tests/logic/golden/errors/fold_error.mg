p(X) :- X = fn:div(1, 0).
