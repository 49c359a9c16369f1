p(X) :- q(X).
