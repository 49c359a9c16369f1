# Left, right and mutual recursion, and a repeated variable.
edge(1, 2). edge(2, 3). edge(3, 1). edge(4, 4).
left(X, Z) :- edge(X, Z).
left(X, Z) :- left(X, Y), edge(Y, Z).
right(X, Z) :- edge(X, Z).
right(X, Z) :- edge(X, Y), right(Y, Z).
even(1, 1) :- edge(1, _).
odd(X, Z) :- even(X, Y), edge(Y, Z).
even(X, Z) :- odd(X, Y), edge(Y, Z).
self_loop(X) :- edge(X, X).
on_cycle(X) :- left(X, X).
