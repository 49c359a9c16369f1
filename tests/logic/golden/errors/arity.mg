Decl p(X).
p(1, 2).
