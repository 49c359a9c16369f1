# RARO guards: when a run must pause for the operator. The runtime reports facts; these rules decide.
# needs_approval(Run, Agent, Category, Reason): Category /safety (something dangerous was attempted) or /quality
# (the run would continue on bad or missing data).
# A fact the runtime reports about one attempt of an agent carries attempt() in its Decl: it is retracted when the
# agent's next attempt begins. The runtime reads the list from these declarations (runtime/guards.py), and refuses to
# report a fact of an attempt whose Decl does not say so — a new breaker's fact is declared here, once.

Decl run_agent(Run, Agent, Role)
  descr [doc("An agent of a run, with its role prefix (/research_, /analyze_, /coder_, /writer_).")]
  bound [/string, /string, /name].
Decl agent_depends(Run, Agent, Upstream)
  descr [doc("Agent reads the output of Upstream.")] bound [/string, /string, /string].
Decl mandatory_tool(Role, Tool)
  descr [doc("A tool an agent of this role must really execute (or bypass with a justification); asserted from the workflow's roles.")]
  bound [/name, /name].
Decl upstream_output(Run, Agent, Upstream, Kind)
  descr [doc("What an upstream agent handed on: /content, /null (tagged [STATUS: NULL]), /empty or /skipped."), attempt()]
  bound [/string, /string, /string, /name].
Decl upstream_truncated(Run, Agent, Upstream, Kept, Total)
  descr [doc("The context window's reserves leave room for only Kept of the Total characters of Upstream's output; the agent receives them with a marker."), attempt()]
  bound [/string, /string, /string, /number, /number].
Decl upstream_files(Run, Agent, Count)
  descr [doc("Files the upstream agents produced in the run's workspace."), attempt()] bound [/string, /string, /number].
Decl preflight(Run, Agent)
  descr [doc("The agent is about to start: pre-flight guards apply."), attempt()] bound [/string, /string].
Decl finished(Run, Agent)
  descr [doc("The agent's invocation has ended: post-flight guards apply."), attempt()] bound [/string, /string].
Decl status_tag(Run, Agent, Tag)
  descr [doc("The status tag the agent ended with: /success, /null or /missing."), attempt()] bound [/string, /string, /name].
Decl bypass(Run, Agent, Justification)
  descr [doc("The agent started its answer with [BYPASS: Justification]."), attempt()] bound [/string, /string, /string].
Decl tool_executed(Run, Agent, Tool)
  descr [doc("A tool call the virtual store really carried out for the agent (not what the text claims)."), attempt()]
  bound [/string, /string, /name].
Decl hard_error(Run, Agent, Message)
  descr [doc("The invocation failed: provider error, rejected packet, timeout, crash."), attempt()]
  bound [/string, /string, /string].
Decl error_kind(Run, Agent, Kind)
  descr [doc("What kind of failure the hard error is, as the runtime saw it: /transport (the model could not be reached), /timeout (no answer in time), /cut_off (the output-token limit), /provider (the provider answered with an error), /backend (the model backend crashed), /packet (the reply broke the control-packet protocol), /tool_requests (malformed tool requests), /prompt_too_long, /internal."), attempt()]
  bound [/string, /string, /name].
Decl event(Run, Seq, Type, Agent)
  descr [doc("The run's events of the types some cortex pattern triggers on (/agent_failed, /tool_call, ...).")]
  bound [/string, /number, /name, /string].
Decl tool_call(Run, Agent, Seq, Tool, Argument)
  descr [doc("A tool call the model requested (before it runs), with its target or code."), attempt()]
  bound [/string, /string, /number, /name, /string].
Decl model_refused(Run, Agent, Text)
  descr [doc("The model refused (a provider's refusal field), with its text."), attempt()] bound [/string, /string, /string].
Decl native_tool_call(Run, Agent, Tool)
  descr [doc("The model called a tool natively instead of in control_packet.tool_requests; it did not run."), attempt()]
  bound [/string, /string, /string].
Decl finish_reason(Run, Agent, Reason)
  descr [doc("Why the model's last answer ended: /stop, /length, /tool_calls, /content_filter, /refusal, ..."), attempt()]
  bound [/string, /string, /name].
Decl agent_output(Run, Agent, Text)
  descr [doc("The surface response of the agent's attempt (its first 16,000 characters)."), attempt()]
  bound [/string, /string, /string].
Decl agent_output_digest(Run, Agent, Digest)
  descr [doc("sha256:... of the whole surface response, when it is longer than agent_output keeps."), attempt()]
  bound [/string, /string, /string].
Decl agent_model(Run, Agent, Model)
  descr [doc("The model backend that answered the attempt, e.g. openai-chat:gpt-4o@https://..."), attempt()]
  bound [/string, /string, /string].
Decl model_fallback(Run, Agent, Model, Error)
  descr [doc("A model failed before its first token and the next fallback model was asked instead."), attempt()]
  bound [/string, /string, /string, /string].
Decl memory_write(Run, Agent, Op, Key, Value)
  descr [doc("A memory operation of the attempt (/note, /promote_to_long_term, /store_vector, /forget); it is applied only if the attempt completes without a pause."), attempt()]
  bound [/string, /string, /name, /string, /string].
Decl mcp_tool_of(Tool, Server, Name)
  descr [doc("An MCP tool a workflow gives its agents (tools: [mcp:SERVER/NAME]), under the name the agent calls it by.")]
  bound [/name, /string, /string].
Decl mcp_tool_read_only(Tool)
  descr [doc("Its server marks the MCP tool read-only (readOnlyHint).")] bound [/name].
Decl mcp_tool_destructive(Tool)
  descr [doc("The MCP tool may destroy data: destructiveHint true, or unset on a tool that is not read-only (the MCP default).")]
  bound [/name].
Decl current_call(Run, Agent, Seq)
  descr [doc("The tool call being checked at the /tool_call checkpoint."), attempt()] bound [/string, /string, /number].
Decl approved_reason(Run, Agent, Seq, Category, Reason)
  descr [doc("Call Seq is identical (tool, target, content) to one an operator let through by retrying the pause that held it, and this is a reason they saw then; each such approval serves one call, once."), attempt()]
  bound [/string, /string, /number, /name, /string].
Decl tool_in_doubt(Run, Agent, Tool, Target)
  descr [doc("The tool journal holds an intent without a result for this call: it was running when the driver stopped, so it may or may not have taken effect."), attempt()]
  bound [/string, /string, /string, /string].
Decl tool_content(Run, Agent, Seq, Text)
  descr [doc("The content a tool call carries (a write_file's text; its first 16,000 characters), before it runs."), attempt()]
  bound [/string, /string, /number, /string].
Decl tool_content_digest(Run, Agent, Seq, Digest)
  descr [doc("sha256:... of the whole content, when it is longer than tool_content keeps."), attempt()]
  bound [/string, /string, /number, /string].
Decl agent_usage(Run, Agent, InputTokens, OutputTokens, Millis)
  descr [doc("What the attempt used: tokens in and out (as the provider counted them) and milliseconds."), attempt()]
  bound [/string, /string, /number, /number, /number].
Decl run_usage(Run, Tokens, Seconds)
  descr [doc("What the run has spent so far: tokens (input + output, as providers counted them) and seconds in attempts.")]
  bound [/string, /number, /number].
Decl run_cost(Run, Cost)
  descr [doc("What the run's attempts have cost so far, by its price table (0.0 for models without a price).")]
  bound [/string, /float64].
Decl run_wall(Run, Seconds)
  descr [doc("How long the run has been running so far, pauses excluded.")] bound [/string, /number].
Decl run_budget(Run, Kind, Limit)
  descr [doc("A budget of the run (/max_tokens, /max_model_seconds, /max_wall_seconds), recorded when it was created.")]
  bound [/string, /name, /number].
Decl run_cost_budget(Run, Limit)
  descr [doc("The run's cost budget (budgets.max_cost, in the price table's currency), recorded when it was created.")]
  bound [/string, /float64].

Decl needs_approval(Run, Agent, Category, Reason)
  descr [doc("The run pauses: the operator must retry, skip or abort.")]
  bound [/string, /string, /name, /string].
Decl paused_for(Run, Agent, Category, Cause, Reason)
  descr [doc("A reason to pause with its cause (/cut_off, /transport, /semantic_null, ...): the cause ranks the reason (cause_rank) and chooses its recovery hint (cause_hint). Every shipped breaker derives this; a rule of yours may too, or derive needs_approval alone (ranked after every shipped cause).")]
  bound [/string, /string, /name, /name, /string].
needs_approval(R, A, Category, Reason) :- paused_for(R, A, Category, _, Reason).
Decl recovery_hint(Category, Hint) descr [doc("Shown on the approval card when its cause has no hint of its own.")] bound [/name, /string].
recovery_hint(/quality, "Check the instructions or the data sources, then retry, skip or abort.").
recovery_hint(/safety, "A dangerous action was stopped before it ran. Execute lets a held call run once, exactly as it was asked; or change the instructions, skip or abort.").

# Each shipped breaker below has a name; a configuration disables one only explicitly (policy.disable_guards), which
# adds guard_disabled(/name) to the run's pinned rules.
Decl shipped_guard(Name) descr [doc("A breaker this file ships, by name.")] bound [/name].
shipped_guard(/context_drought). shipped_guard(/semantic_null). shipped_guard(/protocol_violation).
shipped_guard(/hard_error). shipped_guard(/refusal). shipped_guard(/native_tool_call). shipped_guard(/content_filter).
shipped_guard(/token_budget). shipped_guard(/time_budget). shipped_guard(/wall_time_budget). shipped_guard(/cost_budget).
shipped_guard(/mcp_writes). shipped_guard(/cut_off). shipped_guard(/provenance).
Decl guard_disabled(Name) descr [doc("A shipped breaker the configuration disabled (policy.disable_guards).")]
  bound [/name].

# mandatory_tool/2 comes from the run's workflow (its roles, or the default roles): one source of truth.

# -- pre-flight: context drought ------------------------------------------------------------------------------
Decl has_upstream(Run, Agent) descr [doc("The agent depends on others.")] bound [/string, /string].
has_upstream(R, A) :- agent_depends(R, A, _).
Decl usable_upstream(Run, Agent) descr [doc("At least one upstream output has content.")] bound [/string, /string].
usable_upstream(R, A) :- upstream_output(R, A, _, /content).
Decl upstream_produced_files(Run, Agent) descr [doc("Upstream agents left files.")] bound [/string, /string].
upstream_produced_files(R, A) :- upstream_files(R, A, N), N > 0.

paused_for(R, A, /quality, /context_drought, Reason) :-
  !guard_disabled(/context_drought), preflight(R, A), has_upstream(R, A), !usable_upstream(R, A), !upstream_produced_files(R, A),
  Reason = fn:string:concat("Context drought: agent '", A, "' would start, but its upstream agents provided no usable data (empty, [STATUS: NULL] or skipped).").

# -- post-flight: semantic null, protocol violation, hard errors ------------------------------------------------
paused_for(R, A, /quality, /semantic_null, Reason) :-
  !guard_disabled(/semantic_null), finished(R, A), status_tag(R, A, /null),
  Reason = fn:string:concat("Semantic null: agent '", A, "' reported [STATUS: NULL] (it found no data).").

Decl bypassed(Run, Agent) descr [doc("The agent justified not using its mandatory tool.")] bound [/string, /string].
bypassed(R, A) :- bypass(R, A, _).
Decl failed_hard(Run, Agent) descr [doc("The attempt ended in a hard error or was cut off: whatever it did not do, that is the cause.")] bound [/string, /string].
failed_hard(R, A) :- hard_error(R, A, _).
failed_hard(R, A) :- cut_off(R, A).
paused_for(R, A, /quality, /protocol_violation, Reason) :-
  !guard_disabled(/protocol_violation), finished(R, A), !failed_hard(R, A), run_agent(R, A, Role), mandatory_tool(Role, Tool), !tool_executed(R, A, Tool), !bypassed(R, A),
  Reason = fn:string:concat("Protocol violation: agent '", A, "' did not execute ", fn:name:to_string(Tool), " (its role requires it) and gave no [BYPASS: ...] justification.").

paused_for(R, A, /quality, Cause, Reason) :-
  !guard_disabled(/hard_error), hard_error(R, A, Message), !cut_off(R, A), failure_cause(R, A, Cause),
  Reason = fn:string:concat("Execution failure in agent '", A, "': ", Message).
Decl failure_cause(Run, Agent, Cause)
  descr [doc("The cause a hard error is ranked by: its kind, or /failure when the runtime named none.")]
  bound [/string, /string, /name].
failure_cause(R, A, Kind) :- hard_error(R, A, _), error_kind(R, A, Kind).
Decl has_error_kind(Run, Agent) descr [doc("The runtime named the hard error's kind.")] bound [/string, /string].
has_error_kind(R, A) :- error_kind(R, A, _).
failure_cause(R, A, /failure) :- hard_error(R, A, _), !has_error_kind(R, A).

# -- post-flight: the answer was cut off at the output-token limit (the same reason whichever path it came by: the
# local model's limit, a provider's finish_reason "length", a gateway in between) ----------------------------------
Decl cut_off(Run, Agent) descr [doc("The answer reached the model's output-token limit before it ended.")] bound [/string, /string].
cut_off(R, A) :- finish_reason(R, A, /length).
cut_off(R, A) :- error_kind(R, A, /cut_off).
paused_for(R, A, /quality, /cut_off, Reason) :-
  !guard_disabled(/cut_off), finished(R, A), cut_off(R, A),
  Reason = fn:string:concat("Cut off: the answer of agent '", A, "' reached the model's output-token limit and was cut off before it ended.").

# -- MCP tools in workflows: as the MCP guard's shipped policy, a tool that is not read-only waits for an operator --
# (the write holds are the shipped writes.mg, shared with the MCP guard: the call is the agent's name for the tool)
write_call(Tool, Server, Name) :- mcp_tool_of(Tool, Server, Name).
write_read_only(Server, Name) :- mcp_tool_of(Tool, Server, Name), mcp_tool_read_only(Tool).
write_destructive(Server, Name) :- mcp_tool_of(Tool, Server, Name), mcp_tool_destructive(Tool).
paused_for(R, A, /safety, /mcp_write, Reason) :-
  !guard_disabled(/mcp_writes), tool_call(R, A, _, Tool, _), write_held(Tool, Held),
  Reason = fn:string:concat("The MCP tool ", Held, ".").

# -- where each value came from: the shipped flows.mg (shared with the MCP guard) judges the flows of a call --------
# The runtime reports, for the call being checked, which earlier results of the agent's session (its tool results
# this attempt; its upstream agents' tool results and outputs) hold each argument's value, and whether the workflow's
# request names it (runtime/flows.py). A flow flows.mg refuses is a refused call: it does not run, the agent reads why
# in its tool results and goes on. A flow that needs an operator pauses the run before the call.
Decl call_flow(Run, Agent, Seq, Call)
  descr [doc("The tool call Seq of the agent is the call Call of flows.mg (the facts of its flows are reported under Call while it is checked).")]
  bound [/string, /string, /number, /string].
Decl tool_call_refused(Run, Agent, Seq, Reason)
  descr [doc("The tool call being checked is refused: it does not run, and the agent reads why in its tool results.")]
  bound [/string, /string, /number, /string].
tool_call_refused(R, A, Seq, Reason) :-
  !guard_disabled(/provenance), current_call(R, A, Seq), call_flow(R, A, Seq, C), flow_denied(C, Reason).
paused_for(R, A, /safety, /provenance, Reason) :-
  !guard_disabled(/provenance), current_call(R, A, Seq), call_flow(R, A, Seq, C), flow_needs_approval(C, Reason).

# -- on resume: a tool call in doubt (not a breaker one can disable: an effect must never repeat unasked) ----------
paused_for(R, A, /safety, /in_doubt, Reason) :-
  tool_in_doubt(R, A, Tool, Target),
  Reason = fn:string:concat("Tool call in doubt: ", Tool, " on '", Target, "' of agent '", A, "' was running when the driver stopped; it may or may not have taken effect. Execute runs the agent again (calls that finished are not repeated; this one may run again), Skip or Abort leaves it as it is.").

# -- post-flight: what the model sent besides its answer --------------------------------------------------------
paused_for(R, A, /quality, /refusal, Reason) :-
  !guard_disabled(/refusal), finished(R, A), model_refused(R, A, Text),
  Reason = fn:string:concat("Refusal: the model of agent '", A, "' refused: ", Text).
# A refusal the provider says only by its stop reason (Anthropic's stop_reason "refusal"), with no refusal text.
Decl refused_in_words(Run, Agent) descr [doc("The model's refusal came with its text.")] bound [/string, /string].
refused_in_words(R, A) :- model_refused(R, A, _).
paused_for(R, A, /quality, /refusal, Reason) :-
  !guard_disabled(/refusal), finished(R, A), finish_reason(R, A, /refusal), !refused_in_words(R, A),
  Reason = fn:string:concat("Refusal: the provider stopped the answer of agent '", A, "' as a refusal, without its text.").
paused_for(R, A, /quality, /native_tool_call, Reason) :-
  !guard_disabled(/native_tool_call), finished(R, A), native_tool_call(R, A, Tool),
  Reason = fn:string:concat("Protocol violation: agent '", A, "' called ", Tool, " as a native tool call; tools are requested in control_packet.tool_requests, so it did not run.").
# A tool call the provider says only by its stop reason (finish_reason "tool_calls", Anthropic's "tool_use"), in a
# shape no adapter read: still the native call it is (an attack found a dozen such shapes; none ran).
Decl called_natively(Run, Agent) descr [doc("A native tool call of the answer was read.")] bound [/string, /string].
called_natively(R, A) :- native_tool_call(R, A, _).
paused_for(R, A, /quality, /native_tool_call, Reason) :-
  !guard_disabled(/native_tool_call), finished(R, A), finish_reason(R, A, /tool_calls), !called_natively(R, A),
  Reason = fn:string:concat("Protocol violation: the provider ended the answer of agent '", A, "' as a native tool call, in a form that could not be read; tools are requested in control_packet.tool_requests, so nothing ran.").
paused_for(R, A, /quality, /content_filter, Reason) :-
  !guard_disabled(/content_filter), finished(R, A), finish_reason(R, A, /content_filter),
  Reason = fn:string:concat("Content filter: the provider stopped the answer of agent '", A, "'.").

# -- which pause the operator sees: checkpoints and ranks --------------------------------------------------------
# The runtime asks at four checkpoints: before an agent starts (/preflight), when the model requested a tool and it
# has not run yet (/tool_call), when the agent's invocation ended (/finished), and when a stopped driver's run is
# resumed with a tool call in doubt (/resume). It shows the pause these rules
# lead with and lists the rest; it never filters or orders approvals itself.
Decl pause_checkpoint(Checkpoint, Category)
  descr [doc("Approvals of this category pause the run at this checkpoint.")] bound [/name, /name].
pause_checkpoint(/preflight, /safety). pause_checkpoint(/preflight, /quality).
pause_checkpoint(/tool_call, /safety).
pause_checkpoint(/resume, /safety).
pause_checkpoint(/finished, /safety). pause_checkpoint(/finished, /quality).
Decl pause_rank(Category, Rank)
  descr [doc("Which category a pause leads with: the lowest rank.")] bound [/name, /number].
pause_rank(/safety, 1).
pause_rank(/quality, 2).

Decl pauses_now(Run, Agent, Checkpoint, Category, Reason)
  descr [doc("An approval that pauses the run at this checkpoint.")] bound [/string, /string, /name, /name, /string].
pauses_now(R, A, C, Category, Reason) :-
  needs_approval(R, A, Category, Reason), pause_checkpoint(C, Category), !excused(R, A, C, Category, Reason).
Decl excused(Run, Agent, Checkpoint, Category, Reason)
  descr [doc("An operator already approved this reason: for the call being checked at /tool_call, and afterwards (the same reason derived again once the approved call ran) at the agent's other checkpoints.")]
  bound [/string, /string, /name, /name, /string].
excused(R, A, /tool_call, Category, Reason) :- current_call(R, A, Seq), approved_reason(R, A, Seq, Category, Reason).
excused(R, A, C, Category, Reason) :-
  pause_checkpoint(C, Category), C != /tool_call, approved_reason(R, A, _, Category, Reason).

Decl leading_rank(Run, Agent, Checkpoint, Rank)
  descr [doc("The lowest rank among the approvals pausing at this checkpoint.")]
  bound [/string, /string, /name, /number].
leading_rank(R, A, C, Rank) :-
  pauses_now(R, A, C, Category, _), pause_rank(Category, N) |> do fn:group_by(R, A, C), let Rank = fn:min(N).
Decl leading_categories(Run, Agent, Checkpoint, Categories)
  descr [doc("The categories of that rank, in order (fn:collect lists a group's values sorted).")]
  bound [/string, /string, /name, fn:List(/name)].
leading_categories(R, A, C, Categories) :-
  leading_rank(R, A, C, Rank), pauses_now(R, A, C, Category, _), pause_rank(Category, Rank)
  |> do fn:group_by(R, A, C), let Categories = fn:collect_distinct(Category).
Decl leading_reasons(Run, Agent, Checkpoint, Category, Reasons)
  descr [doc("The reasons of the leading category, in order.")] bound [/string, /string, /name, /name, fn:List(/string)].
leading_reasons(R, A, C, Category, Reasons) :-
  leading_categories(R, A, C, Categories), Category = fn:list:get(Categories, 0), lead_rank(R, A, C, Category, Rank),
  reason_rank(R, A, C, Category, Reason, Rank)
  |> do fn:group_by(R, A, C, Category), let Reasons = fn:collect(Reason).

# Within the leading category, the most specific cause leads: a transport failure, a timeout or a cut-off before a
# generic failure; a breaker's reason before one of your rules that names no cause; a cortex pattern's (a generic
# "an agent failed") last, so it never hides the breaker that tripped. Ties read in order of their text.
Decl cause_rank(Cause, Rank)
  descr [doc("How specific a cause is: the lowest rank leads the pause. Add causes of your own with their rank.")]
  bound [/name, /number].
cause_rank(/transport, 1). cause_rank(/timeout, 1). cause_rank(/cut_off, 1). cause_rank(/in_doubt, 1).
cause_rank(/refusal, 2). cause_rank(/content_filter, 2). cause_rank(/budget, 2). cause_rank(/provider, 2).
cause_rank(/backend, 2). cause_rank(/prompt_too_long, 2). cause_rank(/mcp_write, 3). cause_rank(/provenance, 2).
cause_rank(/packet, 3). cause_rank(/tool_requests, 3). cause_rank(/internal, 3). cause_rank(/failure, 3).
cause_rank(/native_tool_call, 4). cause_rank(/protocol_violation, 4). cause_rank(/context_drought, 4).
cause_rank(/semantic_null, 5).  # an agent that did not run its mandatory tool and found nothing: the first is why
Decl causeless_rank(Source, Rank)
  descr [doc("The rank of a reason no rule gave a cause: /rule (a needs_approval rule of yours), /pattern (a cortex pattern).")]
  bound [/name, /number].
causeless_rank(/rule, 6). causeless_rank(/pattern, 9).
Decl has_cause(Run, Agent, Category, Reason) descr [doc("Some rule gave this reason a cause.")]
  bound [/string, /string, /name, /string].
has_cause(R, A, Category, Reason) :- paused_for(R, A, Category, _, Reason).
Decl reason_rank(Run, Agent, Checkpoint, Category, Reason, Rank)
  descr [doc("A pausing reason with the rank of its cause.")] bound [/string, /string, /name, /name, /string, /number].
reason_rank(R, A, C, Category, Reason, Rank) :-
  pauses_now(R, A, C, Category, Reason), paused_for(R, A, Category, Cause, Reason), cause_rank(Cause, Rank).
reason_rank(R, A, C, Category, Reason, Rank) :-
  pauses_now(R, A, C, Category, Reason), !has_cause(R, A, Category, Reason), !pattern_approval(R, A, Category, Reason),
  causeless_rank(/rule, Rank).
reason_rank(R, A, C, Category, Reason, Rank) :-
  pauses_now(R, A, C, Category, Reason), !has_cause(R, A, Category, Reason), pattern_approval(R, A, Category, Reason),
  causeless_rank(/pattern, Rank).
Decl lead_rank(Run, Agent, Checkpoint, Category, Rank)
  descr [doc("The lowest rank among the reasons pausing in this category.")] bound [/string, /string, /name, /name, /number].
lead_rank(R, A, C, Category, Rank) :-
  reason_rank(R, A, C, Category, _, N) |> do fn:group_by(R, A, C, Category), let Rank = fn:min(N).
Decl pause_leads_with(Run, Agent, Checkpoint, Category, Reason)
  descr [doc("The approval a pause leads with (its card, its hint, its explanation): exactly one per pausing checkpoint."),
         fundep([Run, Agent, Checkpoint], [Category, Reason])]
  bound [/string, /string, /name, /name, /string].
pause_leads_with(R, A, C, Category, Reason) :-
  leading_reasons(R, A, C, Category, Reasons), Reason = fn:list:get(Reasons, 0).

# -- the recovery hint: derived from the cause the pause leads with (and the agent's role), else its category's ----
Decl cause_hint(Cause, Hint) descr [doc("What the operator can do about a pause with this cause.")] bound [/name, /string].
cause_hint(/transport, "The model could not be reached: check that it runs at the address in the error (or that the network allows it), then Execute to try again.").
cause_hint(/timeout, "The model did not answer in time: use a faster model or raise max_execution_time_sec in the agent's shard profile ([limits]), then Execute.").
cause_hint(/cut_off, "Ask for a shorter answer in the instructions (e.g. 'at most five sentences'), or use a model with a higher output limit, then Execute.").
cause_hint(/provider, "The provider refused the request (the error says why: key, quota, rate, model name): fix that, then Execute.").
cause_hint(/backend, "The model backend crashed: check the model file or server, then Execute.").
cause_hint(/packet, "The reply broke the control-packet protocol: Execute to ask again, or use a model that follows JSON schemas.").
cause_hint(/prompt_too_long, "The prompt does not fit the context window: shorten the instructions or the upstream outputs, then Execute; or Skip.").
cause_hint(/semantic_null, "The agent found nothing: give it a better source or more specific instructions, then Execute; or Skip to go on without it.").
cause_hint(/context_drought, "Its upstream agents handed on nothing usable: Execute to try it anyway, Skip it, or go back and fix them.").
cause_hint(/refusal, "The model refused: rephrase the instructions, then Execute; or Skip.").
cause_hint(/content_filter, "The provider's content filter stopped the answer: rephrase the instructions, then Execute; or Skip.").
cause_hint(/budget, "The run's budget is spent: raise it in the configuration ([budgets]) and re-pin the run (groundstate runs repin), or Abort.").
cause_hint(/native_tool_call, "The model called a tool natively; tools are requested in the control packet: Execute to ask again, or use a model that follows the protocol.").
cause_hint(/provenance, "A value of the call came from content others wrote, or was never named by the workflow: check it in the call, then Execute to let it run once, or Skip or Abort.").
cause_hint(/in_doubt, "Check whether the call took effect (its target), then Execute to run the agent again, or Skip to leave it as it is.").
Decl hint_candidate(Run, Agent, Checkpoint, Hint)
  descr [doc("A hint for the cause the pause leads with.")] bound [/string, /string, /name, /string].
Decl lead_cause(Run, Agent, Checkpoint, Cause)
  descr [doc("The cause of the reason the pause leads with.")] bound [/string, /string, /name, /name].
lead_cause(R, A, C, Cause) :- pause_leads_with(R, A, C, Category, Reason), paused_for(R, A, Category, Cause, Reason).
hint_candidate(R, A, C, Hint) :-
  lead_cause(R, A, C, /protocol_violation), run_agent(R, A, Role), mandatory_tool(Role, Tool), !tool_executed(R, A, Tool),
  Named = fn:string:replace(fn:name:to_string(Tool), "/", "", 1),
  Hint = fn:string:concat("Name ", Named, " in the instructions (e.g. 'Use ", Named, " to find ...') so the agent runs it, then Execute; or Skip.").
hint_candidate(R, A, C, Hint) :- lead_cause(R, A, C, Cause), cause_hint(Cause, Hint).
Decl has_hint(Run, Agent, Checkpoint) descr [doc("The leading cause has a hint of its own.")] bound [/string, /string, /name].
has_hint(R, A, C) :- hint_candidate(R, A, C, _).
Decl hint_options(Run, Agent, Checkpoint, Hints)
  descr [doc("The hints the pause may show, in order.")] bound [/string, /string, /name, fn:List(/string)].
hint_options(R, A, C, Hints) :- hint_candidate(R, A, C, Hint) |> do fn:group_by(R, A, C), let Hints = fn:collect(Hint).
Decl pause_hint(Run, Agent, Checkpoint, Hint)
  descr [doc("The recovery hint a pause shows: its leading cause's, else its category's (recovery_hint)."),
         fundep([Run, Agent, Checkpoint], [Hint])]
  bound [/string, /string, /name, /string].
pause_hint(R, A, C, Hint) :- hint_options(R, A, C, Hints), Hint = fn:list:get(Hints, 0).
pause_hint(R, A, C, Hint) :- pause_leads_with(R, A, C, Category, _), !has_hint(R, A, C), recovery_hint(Category, Hint).

# -- helpers for cortex conditions ------------------------------------------------------------------------------
Decl privilege_escalation(Code) descr [doc("Code that tries to gain privileges.")] bound [/string].
privilege_escalation(C) :- tool_call(_, _, _, /execute_python, C), :string:contains(C, "sudo").
privilege_escalation(C) :- tool_call(_, _, _, /execute_python, C), :string:contains(C, "setuid").
privilege_escalation(C) :- tool_call(_, _, _, /execute_python, C), :string:contains(C, "chmod 777").
privilege_escalation(C) :- tool_call(_, _, _, /execute_python, C), :string:contains(C, "/etc/sudoers").

# -- cortex actions ---------------------------------------------------------------------------------------------
Decl pattern_approval(Run, Agent, Category, Reason)
  descr [doc("A cortex pattern's RequestApproval fired (compiled from the run's patterns); it needs approval too.")]
  bound [/string, /string, /name, /string].
needs_approval(R, A, Category, Reason) :- pattern_approval(R, A, Category, Reason).
Decl interrupt(Run, Agent, Reason)
  descr [doc("A cortex pattern interrupts the run: it is aborted.")] bound [/string, /string, /string].
Decl spawn_agent(Run, PatternID, Trigger)
  descr [doc("A cortex pattern adds its agent to the run (once).")] bound [/string, /string, /string].

# Budgets: the attempt that takes the run past one of its budgets pauses it.
paused_for(R, A, /quality, /budget, Reason) :-
  !guard_disabled(/token_budget), finished(R, A), run_usage(R, Tokens, _), run_budget(R, /max_tokens, Max), Tokens > Max,
  Reason = fn:string:concat("The run's token budget is spent: ", Tokens, " tokens used of ", Max, ".").
paused_for(R, A, /quality, /budget, Reason) :-
  !guard_disabled(/time_budget), finished(R, A), run_usage(R, _, Seconds), run_budget(R, /max_model_seconds, Max), Seconds > Max,
  Reason = fn:string:concat("The run's time budget is spent: ", Seconds, " s in attempts of ", Max, " s.").
paused_for(R, A, /quality, /budget, Reason) :-
  !guard_disabled(/wall_time_budget), finished(R, A), run_wall(R, Seconds), run_budget(R, /max_wall_seconds, Max), Seconds > Max,
  Reason = fn:string:concat("The run's wall-time budget is spent: running for ", Seconds, " s of ", Max, " s.").
paused_for(R, A, /quality, /budget, Reason) :-
  !guard_disabled(/cost_budget), finished(R, A), run_cost(R, Cost), run_cost_budget(R, Max), Cost > Max,
  Reason = fn:string:concat("The run's cost budget is spent: ", Cost, " of ", Max, ".").
