# Approval timeouts: which open pause of a run has waited too long, and the decision it gets then. The console
# (groundstate serve) reports every open pause with its age; these rules decide; the runtime records the decision
# as the actor policy:approval_timeout. Configured by [approvals] timeout_sec and default_decision.

Decl open_pause(Run, Pause, Category, AgeSeconds)
  descr [doc("A pause waiting for a decision: its run, id, category (/safety or /quality) and how long it has waited (whole seconds).")]
  bound [/string, /number, /name, /number].
Decl approval_timeout(Seconds)
  descr [doc("How long a pause may wait ([approvals] timeout_sec, whole seconds).")] bound [/number].
Decl default_decision(Decision)
  descr [doc("The configured decision for a pause nobody decided in time ([approvals] default_decision: /skip or /abort).")]
  bound [/name].

Decl timeout_decision(Category, Decision)
  descr [doc("What a pause of this category gets when it times out.")] bound [/name, /name].
# A safety pause held something dangerous: nobody approved it, so the run stops rather than going on without it.
timeout_decision(/safety, /abort).
timeout_decision(/quality, D) :- default_decision(D).

Decl expired(Run, Pause, Decision)
  descr [doc("The pause has waited longer than the timeout: it is decided so.")] bound [/string, /number, /name].
expired(R, P, D) :- open_pause(R, P, C, Age), approval_timeout(Limit), Age >= Limit, timeout_decision(C, D).
