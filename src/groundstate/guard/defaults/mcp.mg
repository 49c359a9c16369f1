# The MCP guard's policy: every tools/call through `groundstate mcp serve` is reported as facts; these rules decide
# whether it is forwarded (/permit), refused (/deny) or held for an operator (/approve). User rule files add to them:
# mcp_denied/2 and mcp_needs_approval/2 are the extension points (a denial wins over everything, an approval need
# over a permit), mcp_permitted/2 too, and mcp_unattended/2 lets a call skip the shipped write holds.

Decl mcp_tool(Server, Tool)
  descr [doc("A tool an upstream MCP server lists (Server is its name in the configuration).")]
  bound [/string, /string].
Decl mcp_read_only(Server, Tool)
  descr [doc("The server marks the tool read-only (its readOnlyHint annotation).")] bound [/string, /string].
Decl mcp_destructive(Server, Tool)
  descr [doc("The tool may destroy data: destructiveHint true, or unset on a tool that is not read-only (the MCP default).")]
  bound [/string, /string].
Decl mcp_call(Call, Server, Tool, Digest, Client)
  descr [doc("A tools/call, before it is forwarded: its id, the server and tool, sha256 of the exact tool and arguments, the calling client.")]
  bound [/string, /string, /string, /string, /string].
Decl mcp_argument(Call, Key, Value)
  descr [doc("One argument value of the call, flattened: nested keys joined by '.', list items by index; booleans /true and /false, null /null.")]
  bound [/string, /string, fn:Union(/string, /number, /float64, /name)].

Decl mcp_path(Call, Key, Path)
  descr [doc("An argument that names a file or directory (path, files.0, repo_path, ...), absolute when it can be (a relative one from the repository the call names): as its text resolves it ('..' taken lexically, as git does) and, when the disk resolves it elsewhere (a symlink), as the disk does too.")]
  bound [/string, /string, /string].
Decl mcp_repo_file(Call, Key, Relative)
  descr [doc("An argument's file inside the repository the call names (its repo_path), relative to its root: notes/a.md. A file outside it, or one its text and the disk place differently (a symlink on the way), has none.")]
  bound [/string, /string, /string].
Decl mcp_git_branch(Call, Branch)
  descr [doc("The current branch of the git repository the call names (its repo_path): main; /detached for a detached HEAD; /unknown when it cannot be read. Write rules about a branch so that /unknown does not pass.")]
  bound [/string, fn:Union(/string, /name)].

Decl mcp_in_doubt(Call)
  descr [doc("An identical call (same server, tool and arguments) was being forwarded when a guard stopped: the tool journal has its intent and no result, so it may or may not have taken effect.")]
  bound [/string].

Decl mcp_permitted(Call, Reason)
  descr [doc("A rule lets the call through when nothing denies or holds it (third in precedence). A permit does not lift a hold: to let a call skip the shipped write holds, write mcp_unattended.")]
  bound [/string, /string].
Decl mcp_needs_approval(Call, Reason)
  descr [doc("An operator must approve the call first (second in precedence: wins over every permit; only a denial wins over it).")]
  bound [/string, /string].
Decl mcp_denied(Call, Reason)
  descr [doc("The call is refused (first in precedence: a denial wins over every hold and permit).")]
  bound [/string, /string].

# -- the shipped policy: read-only tools pass, anything else waits for an operator -----------------------------
# unless one of your rules says a call may run unattended (mcp_unattended): then it is permitted with your reason,
# and every other rule still applies — a denial (yours, flows.mg's) wins, the flows' holds and an in-doubt
# call still wait for an operator. Only the two holds below give way to it.
Decl mcp_unattended(Call, Reason)
  descr [doc("A user rule lets this call run without an operator's approval (the shipped write holds give way; denials and other holds do not).")]
  bound [/string, /string].
Decl mcp_has_unattended(Call) descr [doc("Some rule lets the call run unattended.")] bound [/string].
mcp_has_unattended(C) :- mcp_unattended(C, _).
mcp_permitted(C, Reason) :- mcp_unattended(C, Reason).

mcp_permitted(C, Reason) :-
  mcp_call(C, S, T, _, _), mcp_read_only(S, T),
  Reason = fn:string:concat(S, "/", T, " is read-only").
# the write holds are the shipped writes.mg (shared with the runtime): a call of a tool that is not read-only is held
write_call(C, S, T) :- mcp_call(C, S, T, _, _).
write_read_only(S, T) :- mcp_read_only(S, T).
write_destructive(S, T) :- mcp_destructive(S, T).
write_unattended(C) :- mcp_has_unattended(C).
mcp_needs_approval(C, Reason) :- write_held(C, Reason).

# -- where each value came from: the shipped flows.mg (shared with the runtime) judges the call's flows -----------
flow_call(C, S, T) :- mcp_call(C, S, T, _, _).
flow_tool(S, T) :- mcp_tool(S, T).
flow_read_only(S, T) :- mcp_read_only(S, T).
mcp_denied(C, Reason) :- flow_denied(C, Reason).
mcp_needs_approval(C, Reason) :- flow_needs_approval(C, Reason).
# your Python tools (server python) compute from what they are given: a value their result holds may be anything the
# session held, so their results carry what every upstream tool returned (a value code rebuilt from an email is
# still the email's)
flow_carries("python", T, S, U) :- mcp_tool("python", T), mcp_tool(S, U), S != "python".

# -- the tool journal: a call that may already have taken effect is never repeated without an operator ----------
mcp_needs_approval(C, Reason) :-
  mcp_call(C, S, T, _, _), mcp_in_doubt(C),
  Reason = fn:string:concat("an identical call to ", S, "/", T, " was being forwarded when the guard stopped: it may or may not have taken effect; approve to run it again").

# -- one verdict per call: a denial wins, then an approval need, then a permit; nothing permits: denied ----------
Decl mcp_has_denial(Call) descr [doc("Some rule denies the call.")] bound [/string].
mcp_has_denial(C) :- mcp_denied(C, _).
Decl mcp_has_approval_need(Call) descr [doc("Some rule wants an approval.")] bound [/string].
mcp_has_approval_need(C) :- mcp_needs_approval(C, _).
Decl mcp_has_permit(Call) descr [doc("Some rule permits the call.")] bound [/string].
mcp_has_permit(C) :- mcp_permitted(C, _).

Decl mcp_decision(Call, Decision, Reason)
  descr [doc("What happens to the call (/permit, /approve, /deny) and why.")] bound [/string, /name, /string].
mcp_decision(C, /deny, R) :- mcp_denied(C, R).
mcp_decision(C, /approve, R) :- mcp_needs_approval(C, R), !mcp_has_denial(C).
mcp_decision(C, /permit, R) :- mcp_permitted(C, R), !mcp_has_denial(C), !mcp_has_approval_need(C).
mcp_decision(C, /deny, "no rule permits this call") :-
  mcp_call(C, _, _, _, _), !mcp_has_denial(C), !mcp_has_approval_need(C), !mcp_has_permit(C).

Decl mcp_verdict(Call, Decision, Reasons)
  descr [doc("The call's one decision with all its reasons, in order: what the guard obeys.")]
  bound [/string, /name, fn:List(/string)].
mcp_verdict(C, D, Reasons) :- mcp_decision(C, D, R) |> do fn:group_by(C, D), let Reasons = fn:collect(R).
