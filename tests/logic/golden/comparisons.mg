# Equality binds or tests; ordering compares ints and floats with each other.
n(1). n(2). n(3). f(2.5). f(2.0).
lt(X, Y) :- n(X), n(Y), X < Y.
le(X) :- n(X), X <= 2.
gt(X) :- n(X), X > 2.
ge(X) :- n(X), X >= 2.
mixed(X, F) :- n(X), f(F), X < F.
same_as_float(X) :- n(X), f(F), X = F.
ne(X) :- n(X), X != 2.
next(X, Y) :- n(X), Y = fn:plus(X, 1).
twice(Y, X) :- n(X), fn:mult(X, 2) = Y.
builtin_lt(X) :- n(X), :lt(X, 2).
builtin_ge(X) :- n(X), :ge(X, 3).
