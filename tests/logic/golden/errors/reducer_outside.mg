q(1, 2).
p(N) :- q(X, Y), N = fn:count().
