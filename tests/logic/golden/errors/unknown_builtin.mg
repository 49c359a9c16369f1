q(1).
p(X) :- q(X), :nope(X).
