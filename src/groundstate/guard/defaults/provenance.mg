# Where every value of a call came from: the MCP guard reports, for each argument, which earlier results of the same
# client session it occurs in and whether the user's request names it (guard/history.py); these rules say which
# flows are refused or held. The lethal trifecta — private data, content written by others, a way out — is cut at
# the flow: whatever a web page, an email or a tool result tells the model, a value it supplied cannot become an
# effect the user did not ask for. User rule files add to these (mcp_denied / mcp_needs_approval, as in mcp.mg).
# docs/provenance.md explains each rule and what value matching cannot see.

Decl mcp_open_world(Server, Tool)
  descr [doc("The tool reaches the open world (its openWorldHint annotation is true, or unset: MCP's default).")]
  bound [/string, /string].
Decl mcp_label(Server, Tool, Label)
  descr [doc("A label the configuration gives the tool ([mcp.servers.NAME.labels]): /untrusted, /private, /outbound, /trusted, /internal.")]
  bound [/string, /string, /name].
Decl mcp_labels_may_loosen()
  descr [doc("The configuration lets /trusted and /internal labels overrule a tool's annotations.")].
Decl mcp_earlier(Call, Earlier, Server, Tool)
  descr [doc("A call the guard forwarded earlier in the same client session, whose result holds one of this call's argument values.")]
  bound [/string, /string, /string, /string].
Decl mcp_session_used(Call, Server, Tool)
  descr [doc("The session holds results of this tool (forwarded earlier in the same client session).")]
  bound [/string, /string, /string].
Decl mcp_argument_from(Call, Key, Earlier, How)
  descr [doc("The argument's value occurs in the earlier call's result: /whole (as it is, in its text), /part (a distinctive word of it: a code, an address, a URL, an id) or /field (it is one whole datum of the result's structured content, and nowhere in its prose).")]
  bound [/string, /string, /string, /name].
Decl mcp_argument_in_request(Call, Key)
  descr [doc("The argument's value occurs in the user's request the client declared (_meta groundstate/request).")]
  bound [/string, /string].
Decl mcp_text_argument(Call, Key)
  descr [doc("The argument is text or a number of at least 5 characters, not a calendar date or time of day: a value that can name or carry something.")]
  bound [/string, /string].
Decl mcp_request_declared(Call) descr [doc("The client declared the user's request for this session.")] bound [/string].
Decl mcp_session_overflowed(Call)
  descr [doc("The session's history passed its bounds: its oldest results were dropped, so their flows cannot be seen.")]
  bound [/string].

# -- where results come from, and where calls go ------------------------------------------------------------------
Decl mcp_loosened(Server, Tool, Label) descr [doc("A loosening label the configuration allows.")]
  bound [/string, /string, /name].
mcp_loosened(S, T, L) :- mcp_label(S, T, L), mcp_labels_may_loosen().

Decl mcp_untrusted_source(Server, Tool)
  descr [doc("The tool's results hold content written by others (open world, or labelled /untrusted).")]
  bound [/string, /string].
mcp_untrusted_source(S, T) :- mcp_open_world(S, T), !mcp_loosened(S, T, /trusted).
mcp_untrusted_source(S, T) :- mcp_label(S, T, /untrusted).

Decl mcp_private_source(Server, Tool) descr [doc("The tool's results are the user's private data (labelled /private).")]
  bound [/string, /string].
mcp_private_source(S, T) :- mcp_label(S, T, /private).

Decl mcp_way_out(Server, Tool)
  descr [doc("A call to the tool can carry data out of the user's hands: open world (even reading: a URL fetched is a message to whoever serves it), or labelled /outbound.")]
  bound [/string, /string].
mcp_way_out(S, T) :- mcp_open_world(S, T), !mcp_loosened(S, T, /internal).
mcp_way_out(S, T) :- mcp_label(S, T, /outbound).

Decl mcp_effectful(Server, Tool) descr [doc("The tool changes something (it is not read-only).")] bound [/string, /string].
mcp_effectful(S, T) :- mcp_tool(S, T), !mcp_read_only(S, T).

# -- the flows ---------------------------------------------------------------------------------------------------
Decl mcp_tainted(Call, Key, Earlier, Server, Tool)
  descr [doc("The argument's value came from content written by others (the earlier call's result) and the user's request does not name it.")]
  bound [/string, /string, /string, /string, /string].
mcp_tainted(C, K, E, S, T) :-
  mcp_argument_copied(C, K, E), mcp_earlier(C, E, S, T), mcp_untrusted_source(S, T), !mcp_argument_in_request(C, K).

# Copied out of what others wrote: out of a result's prose, as it is or a distinctive word of it. A value that is one
# whole datum of a result's structured content (an address in a list of participants, a channel in a list of
# channels) is data the source structured, not words an author slipped into text; it taints nothing by itself.
Decl mcp_argument_copied(Call, Key, Earlier)
  descr [doc("The argument's value was copied out of the earlier call's prose (/whole or /part).")]
  bound [/string, /string, /string].
mcp_argument_copied(C, K, E) :- mcp_argument_from(C, K, E, /whole).
mcp_argument_copied(C, K, E) :- mcp_argument_from(C, K, E, /part).

Decl mcp_session_untrusted(Call) descr [doc("Content written by others is in the session (or may be: it overflowed).")]
  bound [/string].
mcp_session_untrusted(C) :- mcp_session_used(C, S, T), mcp_untrusted_source(S, T).
mcp_session_untrusted(C) :- mcp_session_overflowed(C).

# An effect whose target or payload was written by someone else, not asked for by the user: refused (held, it would
# ask an operator to approve what the attacker wrote; refused, the model reads why and can ask the user).
mcp_denied(C, Reason) :-
  mcp_call(C, S, T, _, _), mcp_effectful(S, T), mcp_tainted(C, K, E, ES, ET),
  Reason = fn:string:concat(S, "/", T, ": its argument '", K, "' came from the result of ", ES, "/", ET, " (", E, "), content written by others, and the user's request does not name it").

# A way out fed by content written by others: refused even when it only reads (fetching a URL an email supplied is a
# message to whoever wrote the email).
mcp_denied(C, Reason) :-
  mcp_call(C, S, T, _, _), mcp_way_out(S, T), !mcp_effectful(S, T), mcp_tainted(C, K, E, ES, ET),
  Reason = fn:string:concat(S, "/", T, " reaches the open world with '", K, "' taken from the result of ", ES, "/", ET, " (", E, "), content written by others").

# A way out that only reads, fed after content written by others with a value neither the user's request nor any
# result holds (it may be that content encoded, reworded or cut up: matching cannot see it) waits for an operator —
# for a client that declared the user's request (without one, every novel value would wait: a second fetch, a
# second search).
Decl mcp_argument_seen(Call, Key) descr [doc("The argument's value occurs in some earlier result of the session.")]
  bound [/string, /string].
mcp_argument_seen(C, K) :- mcp_argument_from(C, K, _, _).
mcp_needs_approval(C, Reason) :-
  mcp_call(C, S, T, _, _), mcp_way_out(S, T), !mcp_effectful(S, T), mcp_session_untrusted(C), mcp_request_declared(C),
  mcp_text_argument(C, K), !mcp_argument_in_request(C, K), !mcp_argument_seen(C, K),
  Reason = fn:string:concat(S, "/", T, " reaches the open world with '", K, "', which neither the user's request nor any result holds, after content written by others entered the session: an operator approves it first").

# Private data never leaves by a way out without an operator.
mcp_needs_approval(C, Reason) :-
  mcp_call(C, S, T, _, _), mcp_way_out(S, T), mcp_argument_from(C, K, E, _), mcp_earlier(C, E, ES, ET),
  mcp_private_source(ES, ET), !mcp_argument_in_request(C, K),
  Reason = fn:string:concat(S, "/", T, " would send '", K, "', taken from private data (", ES, "/", ET, ", ", E, "), out: an operator approves it first").

# Once content written by others is in the session, an outbound effect carrying a value the user never named needs
# an operator (the value may have been paraphrased from that content: matching cannot see it) — unless a result
# vouches for it: it came from a tool whose results are not written by others (your contacts), or it is one whole
# datum of a result's structured content (a participant of the meeting the user named).
Decl mcp_argument_vouched(Call, Key)
  descr [doc("The argument's value came from a result that is not content written by others, or is one whole datum of a result's structured content.")]
  bound [/string, /string].
mcp_argument_vouched(C, K) :- mcp_argument_from(C, K, E, _), mcp_earlier(C, E, S, T), !mcp_untrusted_source(S, T).
mcp_argument_vouched(C, K) :- mcp_argument_from(C, K, _, /field).
mcp_needs_approval(C, Reason) :-
  mcp_call(C, S, T, _, _), mcp_way_out(S, T), mcp_effectful(S, T), mcp_session_untrusted(C),
  mcp_text_argument(C, K), !mcp_argument_in_request(C, K), !mcp_argument_vouched(C, K),
  Reason = fn:string:concat(S, "/", T, " sends '", K, "', which the user's request does not name, after content written by others entered the session: an operator approves it first").
