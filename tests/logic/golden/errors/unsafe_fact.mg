p(X).
