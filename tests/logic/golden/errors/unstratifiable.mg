q(1).
p(X) :- q(X), !p(X).
