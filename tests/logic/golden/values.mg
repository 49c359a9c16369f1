# Every value type, zero-arity atoms, and function applications in facts folded at load time.
name(/a). name(/a/b/c). name(/x.y~z%-9).
string("plain"). string('single'). string("esc\"ape\\ \n\t\x41\u{1F600}"). string(`raw\n
two lines`).
bytes(b"ab\x00\xff").
int(0). int(-7). int(9223372036854775807). int(-9223372036854775808).
float(1.5). float(-0.25). float(1e3). float(2.0). float(.5). float(1.5e-7).
list([]). list([1, [2, 3], "x"]). list([1, 2,]).
map(fn:map()). map([/k: 1, /j: "v"]).
struct({}). struct({/name: "n", /age: 3}).
pair(fn:pair(1, /b)).
folded(fn:plus(1, 2)). folded(fn:list:len([1, 2, 3])). folded(fn:string:concat("a", 1, /b)).
ready.
ok().
# a name never equals a string, and 1 never equals 1.0
distinct(/a). distinct("/a"). distinct(1). distinct(1.0).
