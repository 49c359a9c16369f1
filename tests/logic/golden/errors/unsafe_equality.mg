foo(X) :- X = Y.
