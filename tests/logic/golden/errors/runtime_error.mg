q(0).
p(X) :- q(Z), X = fn:div(1, Z).
