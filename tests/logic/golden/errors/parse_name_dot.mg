q(1).
p(X) :- q(X), X = /bar.
