Decl p(X).
Decl p(Y).
