p(X) :- X = fn:nope(1).
