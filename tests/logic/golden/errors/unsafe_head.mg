q(1).
p(X, Y) :- q(X).
