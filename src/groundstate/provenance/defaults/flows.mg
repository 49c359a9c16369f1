# Where every value of a call came from, and which flows are refused or held — the same rules for the MCP guard (a
# client session's calls) and the runtime (a run's agents). Each reports, for every argument of a call, which earlier
# results of the same session or agent it occurs in and whether the user's request names it (provenance/history.py);
# these rules say which flows are refused (flow_denied) or wait for an operator (flow_needs_approval). The lethal
# trifecta — private data, content written by others, a way out — is cut at the flow: whatever a web page, an email
# or a tool result tells the model, a value it supplied cannot become an effect the user did not ask for.
# The guard obeys them as mcp_denied / mcp_needs_approval (mcp.mg), the runtime as a refused call and a /provenance
# pause (guards.mg). Your rule files add to them like every policy file; docs/provenance.md explains each rule and
# what value matching cannot see.

# -- what the guard or the runtime reports ------------------------------------------------------------------------
Decl flow_call(Call, Server, Tool)
  descr [doc("The call being decided, to the tool Tool of Server (the runtime's own tools are under the server groundstate; an agent's output, under agent).")]
  bound [/string, /string, /string].
Decl flow_tool(Server, Tool) descr [doc("A tool the guard fronts or a run's agents may use.")] bound [/string, /string].
Decl flow_read_only(Server, Tool)
  descr [doc("The tool changes nothing (its readOnlyHint annotation, or the runtime's knowledge of its own tools).")]
  bound [/string, /string].
Decl flow_carries(Server, Tool, FromServer, FromTool)
  descr [doc("The results of Server/Tool hold what FromServer/FromTool returned: an agent's output carries what its context held (the runtime reports it for each upstream agent).")]
  bound [/string, /string, /string, /string].
Decl flow_denied(Call, Reason) descr [doc("The flow is refused: the call does not run, and the model reads why.")]
  bound [/string, /string].
Decl flow_needs_approval(Call, Reason) descr [doc("The flow waits for an operator.")] bound [/string, /string].
Decl flow_open_world(Server, Tool)
  descr [doc("The tool reaches the open world (its openWorldHint annotation is true, or unset: MCP's default).")]
  bound [/string, /string].
Decl flow_label(Server, Tool, Label)
  descr [doc("A label the configuration gives the tool ([mcp.servers.NAME.labels]): /untrusted, /private, /outbound, /trusted, /internal.")]
  bound [/string, /string, /name].
Decl flow_labels_may_loosen()
  descr [doc("The configuration lets /trusted and /internal labels overrule a tool's annotations.")].
Decl flow_earlier(Call, Earlier, Server, Tool)
  descr [doc("A call made earlier in the same session (an MCP client's session; a run's agent with its upstream agents), whose result holds one of this call's argument values.")]
  bound [/string, /string, /string, /string].
Decl flow_session_used(Call, Server, Tool)
  descr [doc("The session holds results of this tool (of calls made earlier in the same session).")]
  bound [/string, /string, /string].
Decl flow_argument_from(Call, Key, Earlier, How)
  descr [doc("The argument's value occurs in the earlier call's result: /whole (as it is, in its text), /part (a distinctive word of it: a code, an address, a URL, an id), /field (it is one whole datum of the result's structured content, and nowhere in its prose) or /core (the value without the marks around it occurs there: @mallory for mallory; read as copied, never as vouched).")]
  bound [/string, /string, /string, /name].
Decl flow_argument_mentioned(Call, Key, Earlier)
  descr [doc("The argument is a short value (an id such as 13) that stands alone as a word in the earlier call's prose, and some result holds it as a datum or the user's request names it (reported only then: otherwise it is /part of that prose).")]
  bound [/string, /string, /string].
Decl flow_argument_in_request(Call, Key)
  descr [doc("The argument's value occurs in the user's request (the one an MCP client declared in _meta groundstate/request; a workflow's agents' instructions and the operator's edits).")]
  bound [/string, /string].
Decl flow_argument_worded(Call, Key)
  descr [doc("The argument's value is the user's request's own text, as written, with at most one slot filled (k, n, m or x as a number of one or two digits) or one pronoun turned (you as I or we), at most one such value a call: the user dictated it. Unlike a named value it is still looked for in the results, so rules 1 and 2 judge where its words came from.")]
  bound [/string, /string].
Decl flow_text_argument(Call, Key)
  descr [doc("The argument is text or a number of at least 5 characters, not a calendar date or time of day: a value that can name or carry something.")]
  bound [/string, /string].
Decl flow_request_declared(Call) descr [doc("The user's request is known (an MCP client declared it; a workflow always states it).")] bound [/string].
Decl flow_session_overflowed(Call)
  descr [doc("The session's history passed its bounds: its oldest results were dropped, so their flows cannot be seen.")]
  bound [/string].

# -- where results come from, and where calls go ------------------------------------------------------------------
Decl flow_loosened(Server, Tool, Label) descr [doc("A loosening label the configuration allows.")]
  bound [/string, /string, /name].
flow_loosened(S, T, L) :- flow_label(S, T, L), flow_labels_may_loosen().

Decl flow_untrusted_source(Server, Tool)
  descr [doc("The tool's results hold content written by others (open world, or labelled /untrusted, or carrying what such a tool returned).")]
  bound [/string, /string].
flow_untrusted_source(S, T) :- flow_open_world(S, T), !flow_loosened(S, T, /trusted).
flow_untrusted_source(S, T) :- flow_label(S, T, /untrusted).
flow_untrusted_source(S, T) :- flow_carries(S, T, FS, FT), flow_untrusted_source(FS, FT).

Decl flow_private_source(Server, Tool) descr [doc("The tool's results are the user's private data (labelled /private).")]
  bound [/string, /string].
flow_private_source(S, T) :- flow_label(S, T, /private).
flow_private_source(S, T) :- flow_carries(S, T, FS, FT), flow_private_source(FS, FT).

Decl flow_way_out(Server, Tool)
  descr [doc("A call to the tool can carry data out of the user's hands: open world (even reading: a URL fetched is a message to whoever serves it), or labelled /outbound.")]
  bound [/string, /string].
flow_way_out(S, T) :- flow_open_world(S, T), !flow_loosened(S, T, /internal).
flow_way_out(S, T) :- flow_label(S, T, /outbound).

Decl flow_destructive(Server, Tool)
  descr [doc("A call to the tool may destroy what it names (its destructiveHint annotation; the runtime's delete_file).")]
  bound [/string, /string].
Decl flow_effectful(Server, Tool) descr [doc("The tool changes something (it is not read-only).")] bound [/string, /string].
flow_effectful(S, T) :- flow_tool(S, T), !flow_read_only(S, T).

# -- the flows ---------------------------------------------------------------------------------------------------
Decl flow_tainted(Call, Key, Earlier, Server, Tool)
  descr [doc("The argument's value came from content written by others (the earlier call's result) and the user's request does not name it.")]
  bound [/string, /string, /string, /string, /string].
flow_tainted(C, K, E, S, T) :-
  flow_argument_copied(C, K, E), flow_earlier(C, E, S, T), flow_untrusted_source(S, T), !flow_argument_in_request(C, K).

# Copied out of what others wrote: out of a result's prose, as it is or a distinctive word of it. A value that is one
# whole datum of a result's structured content (an address in a list of participants, a channel in a list of
# channels) is data the source structured, not words an author slipped into text; it taints nothing by itself.
Decl flow_argument_copied(Call, Key, Earlier)
  descr [doc("The argument's value was copied out of the earlier call's prose (/whole or /part).")]
  bound [/string, /string, /string].
flow_argument_copied(C, K, E) :- flow_argument_from(C, K, E, /whole).
flow_argument_copied(C, K, E) :- flow_argument_from(C, K, E, /part).
flow_argument_copied(C, K, E) :- flow_argument_from(C, K, E, /core).

# Found as it is, in part or as a datum — not only by its core: marks around a core can carry anything, so a core
# found in a result vouches for nothing and does not count as seen.
Decl flow_argument_found(Call, Key, Earlier)
  descr [doc("The argument's value occurs in the earlier call's result /whole, /part or as a /field.")]
  bound [/string, /string, /string].
flow_argument_found(C, K, E) :- flow_argument_from(C, K, E, How), How != /core .  # (/core. would be one name)

# A result that content written by others chose is that content's: a call whose argument was tainted (a city, a
# name, an id copied out of an email) returns what the email asked for — the hotels of the city it named, the
# record it pointed at — so a value taken from that result, even a whole datum of it (one of at least 5 characters:
# short ids recur in any listing by chance), is tainted as the email is. The guard reports, for each earlier call a
# value came from, that call's own facts about its arguments as they were when it was decided (and theirs in turn).
Decl flow_steered(Call)
  descr [doc("An earlier call one of whose arguments was tainted: what its result holds was chosen by content written by others.")]
  bound [/string].
flow_steered(E) :- flow_tainted(E, _, _, _, _).
Decl flow_origins_cut(Call)
  descr [doc("An earlier call whose origins were more than the guard reports (64 facts for one call, 512 for one decision): read as steered, stricter, never looser.")]
  bound [/string].
flow_steered(E) :- flow_origins_cut(E).
flow_tainted(C, K, E, S, T) :-
  flow_argument_copied(C, K, E), flow_earlier(C, E, S, T), flow_steered(E), !flow_argument_in_request(C, K).
flow_tainted(C, K, E, S, T) :-
  flow_argument_from(C, K, E, /field), flow_text_argument(C, K), flow_earlier(C, E, S, T), flow_steered(E),
  !flow_argument_in_request(C, K).

Decl flow_session_untrusted(Call) descr [doc("Content written by others is in the session (or may be: it overflowed).")]
  bound [/string].
flow_session_untrusted(C) :- flow_session_used(C, S, T), flow_untrusted_source(S, T).
flow_session_untrusted(C) :- flow_session_overflowed(C).

# An effect whose target or payload was written by someone else, not asked for by the user: refused (held, it would
# ask an operator to approve what the attacker wrote; refused, the model reads why and can ask the user).
flow_denied(C, Reason) :-
  flow_call(C, S, T), flow_effectful(S, T), flow_tainted(C, K, E, ES, ET),
  Reason = fn:string:concat(S, "/", T, ": its argument '", K, "' came from the result of ", ES, "/", ET, " (", E, "), content written by others, and the user's request does not name it").

# A way out fed by content written by others: refused even when it only reads (fetching a URL an email supplied is a
# message to whoever wrote the email).
flow_denied(C, Reason) :-
  flow_call(C, S, T), flow_way_out(S, T), !flow_effectful(S, T), flow_tainted(C, K, E, ES, ET),
  Reason = fn:string:concat(S, "/", T, " reaches the open world with '", K, "' taken from the result of ", ES, "/", ET, " (", E, "), content written by others").

# A way out that only reads, fed after content written by others with a value neither the user's request nor any
# result holds (it may be that content encoded, reworded or cut up: matching cannot see it) waits for an operator —
# for a client that declared the user's request (without one, every novel value would wait: a second fetch, a
# second search).
Decl flow_argument_seen(Call, Key) descr [doc("The argument's value occurs in some earlier result of the session.")]
  bound [/string, /string].
flow_argument_seen(C, K) :- flow_argument_found(C, K, _).
flow_needs_approval(C, Reason) :-
  flow_call(C, S, T), flow_way_out(S, T), !flow_effectful(S, T), flow_session_untrusted(C), flow_request_declared(C),
  flow_text_argument(C, K), !flow_argument_in_request(C, K), !flow_argument_seen(C, K),
  Reason = fn:string:concat(S, "/", T, " reaches the open world with '", K, "', which neither the user's request nor any result holds, after content written by others entered the session: an operator approves it first").

# A session past its bounds may have held anything, and what it dropped can no longer tie a value to it: a way out
# that only reads, fed a value the user never named and no kept result vouches for, waits for an operator — with or
# without a declared request (a client that declares none would otherwise fetch, unattended, a URL the dropped mail
# dictated). Rare, unlike content written by others entering a session, so the novel values it holds stay few.
flow_needs_approval(C, Reason) :-
  flow_call(C, S, T), flow_way_out(S, T), !flow_effectful(S, T), flow_session_overflowed(C),
  flow_text_argument(C, K), !flow_argument_in_request(C, K), !flow_argument_vouched(C, K),
  Reason = fn:string:concat(S, "/", T, " reaches the open world with '", K, "', which the user's request does not name, after the session passed its bounds (what it held before can no longer be seen): an operator approves it first").

# An irreversible effect on a short id that content written by others spells out as a word ("delete the file with
# ID '13'"), though a listing also holds the id as data or the user's request has the same word ("on June 13"):
# short words recur by chance, so it is not refused as copied — it waits for an operator. Only destructive tools: an
# id in an append or a share recurs in ordinary prose far too often to hold them all, and what they carry is judged
# by the rules above.
flow_needs_approval(C, Reason) :-
  flow_call(C, S, T), flow_destructive(S, T), flow_argument_mentioned(C, K, E), flow_earlier(C, E, ES, ET),
  flow_untrusted_source(ES, ET),
  Reason = fn:string:concat(S, "/", T, " would destroy what '", K, "' names, an id that content written by others spells out (", ES, "/", ET, ", ", E, "): an operator approves it first").

# Private data never leaves by a way out without an operator.
flow_needs_approval(C, Reason) :-
  flow_call(C, S, T), flow_way_out(S, T), flow_argument_from(C, K, E, _), flow_earlier(C, E, ES, ET),
  flow_private_source(ES, ET), !flow_argument_in_request(C, K),
  Reason = fn:string:concat(S, "/", T, " would send '", K, "', taken from private data (", ES, "/", ET, ", ", E, "), out: an operator approves it first").

# Once content written by others is in the session, an outbound effect carrying a value the user never named needs
# an operator (the value may have been paraphrased from that content: matching cannot see it) — unless a result
# vouches for it: it came from a tool whose results are not written by others (your contacts), or it is one whole
# datum of a result's structured content (a participant of the meeting the user named) — or the user dictated it:
# the request's own text, one slot filled or one pronoun turned ("I've seen it in the meeting room!" for "reply that
# you've seen it in the meeting room"), which can carry that one choice of anything else and no more.
Decl flow_argument_vouched(Call, Key)
  descr [doc("The argument's value came from a result that is not content written by others, or is one whole datum of a result's structured content.")]
  bound [/string, /string].
flow_argument_vouched(C, K) :- flow_argument_found(C, K, E), flow_earlier(C, E, S, T), !flow_untrusted_source(S, T).
flow_argument_vouched(C, K) :- flow_argument_from(C, K, _, /field).
flow_needs_approval(C, Reason) :-
  flow_call(C, S, T), flow_way_out(S, T), flow_effectful(S, T), flow_session_untrusted(C),
  flow_text_argument(C, K), !flow_argument_in_request(C, K), !flow_argument_vouched(C, K),
  !flow_argument_worded(C, K),
  Reason = fn:string:concat(S, "/", T, " sends '", K, "', which the user's request does not name, after content written by others entered the session: an operator approves it first").

# A session past its bounds may have held anything: an effect (one that is no way out: those are held above)
# carrying a value the user never named and no kept result vouches for waits for an operator — the value's source may
# be among the dropped results. Past its bounds a session gets stricter, never looser.
flow_needs_approval(C, Reason) :-
  flow_call(C, S, T), flow_effectful(S, T), !flow_way_out(S, T), flow_session_overflowed(C),
  flow_text_argument(C, K), !flow_argument_in_request(C, K), !flow_argument_vouched(C, K),
  Reason = fn:string:concat(S, "/", T, " changes something with '", K, "', which the user's request does not name, after the session passed its bounds (what it held before can no longer be seen): an operator approves it first").
