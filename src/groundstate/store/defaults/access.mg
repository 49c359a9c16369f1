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

# -- separation of duties: an account does not decide what it asked for ------------------------------------------
# A held MCP call made with an account's token (over HTTP) or a pause of a run an account started is decided by
# another account — unless the configuration names the account in [access] self_approval (a team of one).
Decl deciding(Account) descr [doc("The account deciding a held call or a pause (its name).")] bound [/string].
Decl asked_by(Account)
  descr [doc("The account that made the held call or started the paused run, when an account did.")]
  bound [/string].
Decl self_approval(Account)
  descr [doc("The configuration lets this account decide what it asked for ([access] self_approval).")]
  bound [/string].
Decl decision_refused(Account, Reason)
  descr [doc("The account may not take this decision, and why: what the console, the API and the CLI obey.")]
  bound [/string, /string].

decision_refused(A, Reason) :-
  deciding(A), asked_by(A), !self_approval(A),
  Reason = fn:string:concat("operator ", A, " asked for this themselves: another account decides it (or name ", A,
                            " in [access] self_approval)").
