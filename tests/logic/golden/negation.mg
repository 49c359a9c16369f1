# Negation, with `_` existential inside it, over a lower stratum.
person(/ann). person(/bob). person(/cy).
owns(/ann, /car). owns(/ann, /bike). owns(/cy, /bike).
banned(/bike).
owner(P) :- owns(P, _).
no_possessions(P) :- person(P), !owns(P, _).
clean_owner(P) :- owner(P), !dirty(P).
dirty(P) :- owns(P, T), banned(T).
allowed(P, T) :- owns(P, T), !banned(T).
nobody_banned() :- person(_), !banned(/car).
# zero-arity atoms in bodies, positive and negated
someone() :- person(_).
nobody() :- !person(_).
flag_on() :- someone(), !nobody().
flag_off() :- nobody.
