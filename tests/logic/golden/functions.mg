# Every built-in function; arguments come from a fact so nothing is folded at load time.
v(7, -7, 2, 2.5, /a/b/c, "hello world").
arith(P, M, Neg, T, D, Dn, Mo, Mon) :- v(A, B, C, _, _, _),
  P = fn:plus(A, C), M = fn:minus(A, C), Neg = fn:minus(A), T = fn:mult(A, C),
  D = fn:div(A, C), Dn = fn:div(B, C), Mo = fn:mod(A, C), Mon = fn:mod(B, C).
empty_plus(Z) :- v(_, _, _, _, _, _), Z = fn:plus().
floats(P, T, D, S) :- v(A, _, C, F, _, _),
  P = fn:float:plus(A, F), T = fn:float:mult(C, F), D = fn:float:div(A, C), S = fn:sqrt(fn:mult(C, 8)).
lists(L, C, Ap, G, Len, Yes, No) :- v(A, _, C0, _, _, _),
  L = fn:list(A, C0), C = fn:list:cons(0, L), Ap = fn:list:append(L, 9), G = fn:list:get(C, 1),
  Len = fn:list:len(Ap), Yes = fn:list:contains(L, 7), No = fn:list:contains(L, 8).
pairs(P, T, T3) :- v(A, B, _, _, _, _), P = fn:pair(A, B), T = fn:tuple(A), T3 = fn:tuple(A, B, 0).
maps(M, G) :- v(A, B, _, _, _, _), M = fn:map(/x, A, /y, B, /x, 0), G = fn:map:get(M, /x).
structs(S, G) :- v(A, _, _, _, N, _), S = fn:struct(/id, A, /name, N), G = fn:struct:get(S, /name).
names(S, R, T, L) :- v(_, _, _, _, N, _),
  S = fn:name:to_string(N), R = fn:name:root(N), T = fn:name:tip(N), L = fn:name:list(N).
strings(N, F, C, R1, Ra) :- v(A, _, _, X, Nm, S),
  N = fn:number:to_string(A), F = fn:float64:to_string(X), C = fn:string:concat(S, "!", A, Nm),
  R1 = fn:string:replace("a-b-c", "-", "+", 1), Ra = fn:string:replace("a-b-c", "-", "+", -1).
