Decl p(X) bound [/number].
p("text").
