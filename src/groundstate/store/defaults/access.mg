# Who may do what: each operator account has one role; role_may(Role, Action) is what the console, its API and the
# command line obey. Actions: /see (read runs, pauses, calls, metrics), /act (start runs, decide pauses and held MCP
# calls), /administer (manage operator accounts, re-pin a run's policy). Each role may what the role below it may.

Decl role(Role) descr [doc("A role an operator account can have.")] bound [/name].
Decl grants(Role, Action) descr [doc("What a role adds to the roles below it.")] bound [/name, /name].
Decl below(Lower, Higher) descr [doc("Higher may everything Lower may.")] bound [/name, /name].
Decl role_may(Role, Action) descr [doc("An account with Role may take Action.")] bound [/name, /name].

role(/viewer).
role(/operator).
role(/admin).

below(/viewer, /operator).
below(/operator, /admin).

grants(/viewer, /see).
grants(/operator, /act).
grants(/admin, /administer).

role_may(R, A) :- grants(R, A).
role_may(R, A) :- below(L, R), role_may(L, A).
