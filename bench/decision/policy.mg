# bench/decision: who may call which tool — the same policy as policy.rego, on top of the MCP guard's shipped
# mcp.mg (read-only tools pass, destructive ones wait for an operator, a denial wins, nothing permits: denied).

Decl user_role(User, Role) bound [/string, /name].
Decl role_grants(Role, Server, Tool) bound [/name, /string, /string].
Decl known_user(User) bound [/string].

user_role("alice", /admin).
user_role("bob", /developer).
user_role("carol", /viewer).
user_role("dave", /developer).
user_role("dave", /viewer).

role_grants(/viewer, "git", "git_status").
role_grants(/viewer, "git", "git_log").
role_grants(/viewer, "time", "get_current_time").
role_grants(/developer, "git", "git_status").
role_grants(/developer, "git", "git_log").
role_grants(/developer, "git", "git_add").
role_grants(/developer, "git", "git_commit").
role_grants(/admin, "git", "git_status").
role_grants(/admin, "git", "git_log").
role_grants(/admin, "git", "git_add").
role_grants(/admin, "git", "git_commit").
role_grants(/admin, "git", "git_reset").
role_grants(/admin, "time", "get_current_time").

known_user(U) :- user_role(U, _).

mcp_denied(C, Reason) :-
  mcp_call(C, _, _, _, U), !known_user(U),
  Reason = fn:string:concat("unknown user ", U).
mcp_denied(C, Reason) :-
  mcp_call(C, S, T, _, U), known_user(U), !may_use(U, S, T),
  Reason = fn:string:concat(U, " has no role that grants ", S, "/", T).
mcp_denied(C, Reason) :-
  mcp_call(C, _, _, _, _), mcp_argument(C, "repo_path", P), :string:starts_with(P, "/etc"),
  Reason = fn:string:concat("the repository ", P, " is under /etc").

Decl may_use(User, Server, Tool) bound [/string, /string, /string].
may_use(U, S, T) :- user_role(U, R), role_grants(R, S, T).
