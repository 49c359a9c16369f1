p("abc).
