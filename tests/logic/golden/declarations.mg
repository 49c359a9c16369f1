# Declarations with descriptors and alternative bounds; a package prefixes its predicates.
Package shop!
Decl item(Id, Price)
  descr [doc("An item for sale and its price."), arg(Id, "item name"), arg(Price, "in cents"), extensional()]
  bound [/item, /number]
  bound [/item, /float64].
Decl tagged(Id, Tags) bound [/item, fn:List(/name)].
Decl meta(Id, M) bound [/any, fn:Union(fn:Map(/string, /number), fn:Struct(/color, /string))].
item(/item/apple, 120). item(/item/pear, 0.99).
tagged(/item/apple, [/fruit, /red]).
meta(/item/apple, ["weight": 150]). meta(/item/pear, {/color: "green", /extra: 1}).
cheap(I) :- item(I, P), P < 100.
