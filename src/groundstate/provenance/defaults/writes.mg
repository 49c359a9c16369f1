# The write holds: a tool its server does not mark read-only waits for an operator before it runs — the same rules
# for the MCP guard (a client's tools/call) and the runtime (a workflow agent's MCP tool). Each host reports the call
# and what the tool's annotations say; these rules say which calls are held and why. The guard obeys a hold as
# mcp_needs_approval (mcp.mg), the runtime as a /safety pause of the /mcp_write kind (guards.mg). A host lets a call
# skip them with write_unattended: the guard when a user rule says mcp_unattended, never the runtime (a run turns the
# whole breaker off instead: policy.disable_guards = ["mcp_writes"]).

Decl write_call(Call, Server, Tool)
  descr [doc("A call of the tool Tool of the MCP server Server, before it runs (the guard's call id; the runtime's name of the tool for its agents).")]
  bound [fn:Union(/string, /name), /string, /string].
Decl write_read_only(Server, Tool)
  descr [doc("The server marks the tool read-only (its readOnlyHint annotation).")] bound [/string, /string].
Decl write_destructive(Server, Tool)
  descr [doc("The tool may destroy data: destructiveHint true, or unset on a tool that is not read-only (the MCP default).")]
  bound [/string, /string].
Decl write_unattended(Call)
  descr [doc("The host lets this call skip the write holds (the guard: one of your rules says mcp_unattended).")]
  bound [fn:Union(/string, /name)].
Decl write_held(Call, Reason)
  descr [doc("The call waits for an operator: its tool is not marked read-only.")]
  bound [fn:Union(/string, /name), /string].

write_held(C, Reason) :-
  write_call(C, S, T), write_destructive(S, T), !write_unattended(C),
  Reason = fn:string:concat(S, "/", T, " may destroy data (the server marks it destructive): an operator approves it first").
write_held(C, Reason) :-
  write_call(C, S, T), !write_read_only(S, T), !write_destructive(S, T), !write_unattended(C),
  Reason = fn:string:concat(S, "/", T, " changes things (it is not read-only): an operator approves it first").
