# Which services can reach which, and which reachable pairs the policy forbids.
Decl link(From, To)
  descr [doc("A direct network link between two services.")]
  bound [/service, /service].

Decl forbidden(From, To)
  descr [doc("Pairs of services that must never be able to reach each other.")]
  bound [/service, /service].

link(/service/web, /service/api).
link(/service/api, /service/db).
link(/service/api, /service/cache).
link(/service/batch, /service/db).

forbidden(/service/web, /service/db).
forbidden(/service/batch, /service/web).

reaches(X, Y) :- link(X, Y).
reaches(X, Z) :- reaches(X, Y), link(Y, Z).

violation(X, Y) :- forbidden(X, Y), reaches(X, Y).
safe_pair(X, Y) :- forbidden(X, Y), !reaches(X, Y).

fan_out(X, N) :- reaches(X, _) |> do fn:group_by(X), let N = fn:count().
