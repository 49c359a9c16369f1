# RARO guards: when a run must pause for the operator. The runtime reports facts; these rules decide.
# needs_approval(Run, Agent, Category, Reason): Category /safety (something dangerous was attempted) or /quality
# (the run would continue on bad or missing data).

Decl run_agent(Run, Agent, Role)
  descr [doc("An agent of a run, with its role prefix (/research_, /analyze_, /coder_, /writer_).")]
  bound [/string, /string, /name].
Decl agent_depends(Run, Agent, Upstream)
  descr [doc("Agent reads the output of Upstream.")] bound [/string, /string, /string].
Decl mandatory_tool(Role, Tool)
  descr [doc("A tool an agent of this role must really execute (or bypass with a justification); asserted from the workflow's roles.")]
  bound [/name, /name].
Decl upstream_output(Run, Agent, Upstream, Kind)
  descr [doc("What an upstream agent handed on: /content, /null (tagged [STATUS: NULL]), /empty or /skipped.")]
  bound [/string, /string, /string, /name].
Decl upstream_truncated(Run, Agent, Upstream, Kept, Total)
  descr [doc("The context window's reserves leave room for only Kept of the Total characters of Upstream's output; the agent receives them with a marker.")]
  bound [/string, /string, /string, /number, /number].
Decl upstream_files(Run, Agent, Count)
  descr [doc("Files the upstream agents produced in the run's workspace.")] bound [/string, /string, /number].
Decl preflight(Run, Agent)
  descr [doc("The agent is about to start: pre-flight guards apply.")] bound [/string, /string].
Decl finished(Run, Agent)
  descr [doc("The agent's invocation has ended: post-flight guards apply.")] bound [/string, /string].
Decl status_tag(Run, Agent, Tag)
  descr [doc("The status tag the agent ended with: /success, /null or /missing.")] bound [/string, /string, /name].
Decl bypass(Run, Agent, Justification)
  descr [doc("The agent started its answer with [BYPASS: Justification].")] bound [/string, /string, /string].
Decl tool_executed(Run, Agent, Tool)
  descr [doc("A tool call the virtual store really carried out for the agent (not what the text claims).")]
  bound [/string, /string, /name].
Decl hard_error(Run, Agent, Message)
  descr [doc("The invocation failed: provider error, rejected packet, timeout, crash.")]
  bound [/string, /string, /string].
Decl event(Run, Seq, Type, Agent)
  descr [doc("The run's events of the types some cortex pattern triggers on (/agent_failed, /tool_call, ...).")]
  bound [/string, /number, /name, /string].
Decl tool_call(Run, Agent, Seq, Tool, Argument)
  descr [doc("A tool call the model requested (before it runs), with its target or code.")]
  bound [/string, /string, /number, /name, /string].
Decl model_refused(Run, Agent, Text)
  descr [doc("The model refused (a provider's refusal field), with its text.")] bound [/string, /string, /string].
Decl native_tool_call(Run, Agent, Tool)
  descr [doc("The model called a tool natively instead of in control_packet.tool_requests; it did not run.")]
  bound [/string, /string, /string].
Decl finish_reason(Run, Agent, Reason)
  descr [doc("Why the model's last answer ended: /stop, /length, /tool_calls, /content_filter, /refusal, ...")]
  bound [/string, /string, /name].
Decl agent_output(Run, Agent, Text)
  descr [doc("The surface response of the agent's attempt (its first 16,000 characters).")]
  bound [/string, /string, /string].
Decl agent_output_digest(Run, Agent, Digest)
  descr [doc("sha256:... of the whole surface response, when it is longer than agent_output keeps.")]
  bound [/string, /string, /string].
Decl agent_model(Run, Agent, Model)
  descr [doc("The model backend that answered the attempt, e.g. openai-chat:gpt-4o@https://...")]
  bound [/string, /string, /string].
Decl model_fallback(Run, Agent, Model, Error)
  descr [doc("A model failed before its first token and the next fallback model was asked instead.")]
  bound [/string, /string, /string, /string].
Decl memory_write(Run, Agent, Op, Key, Value)
  descr [doc("A memory operation of the attempt (/note, /promote_to_long_term, /store_vector, /forget); it is applied only if the attempt completes without a pause.")]
  bound [/string, /string, /name, /string, /string].
Decl mcp_tool_of(Tool, Server, Name)
  descr [doc("An MCP tool a workflow gives its agents (tools: [mcp:SERVER/NAME]), under the name the agent calls it by.")]
  bound [/name, /string, /string].
Decl mcp_tool_read_only(Tool)
  descr [doc("Its server marks the MCP tool read-only (readOnlyHint).")] bound [/name].
Decl current_call(Run, Agent, Seq)
  descr [doc("The tool call being checked at the /tool_call checkpoint.")] bound [/string, /string, /number].
Decl approved_reason(Run, Agent, Seq, Category, Reason)
  descr [doc("Call Seq is identical (tool, target, content) to one an operator let through by retrying the pause that held it, and this is a reason they saw then; each such approval serves one call, once.")]
  bound [/string, /string, /number, /name, /string].
Decl tool_in_doubt(Run, Agent, Tool, Target)
  descr [doc("The tool journal holds an intent without a result for this call: it was running when the driver stopped, so it may or may not have taken effect.")]
  bound [/string, /string, /string, /string].
Decl tool_content(Run, Agent, Seq, Text)
  descr [doc("The content a tool call carries (a write_file's text; its first 16,000 characters), before it runs.")]
  bound [/string, /string, /number, /string].
Decl tool_content_digest(Run, Agent, Seq, Digest)
  descr [doc("sha256:... of the whole content, when it is longer than tool_content keeps.")]
  bound [/string, /string, /number, /string].
Decl agent_usage(Run, Agent, InputTokens, OutputTokens, Millis)
  descr [doc("What the attempt used: tokens in and out (as the provider counted them) and milliseconds.")]
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
Decl recovery_hint(Category, Hint) descr [doc("Shown on the approval card.")] bound [/name, /string].
recovery_hint(/quality, "Check the instructions or the data sources, then retry, skip or abort.").
recovery_hint(/safety, "A dangerous action was stopped before it ran. Execute lets a held call run once, exactly as it was asked; or change the instructions, skip or abort.").

# Each shipped breaker below has a name; a configuration disables one only explicitly (policy.disable_guards), which
# adds guard_disabled(/name) to the run's pinned rules.
Decl shipped_guard(Name) descr [doc("A breaker this file ships, by name.")] bound [/name].
shipped_guard(/context_drought). shipped_guard(/semantic_null). shipped_guard(/protocol_violation).
shipped_guard(/hard_error). shipped_guard(/refusal). shipped_guard(/native_tool_call). shipped_guard(/content_filter).
shipped_guard(/token_budget). shipped_guard(/time_budget). shipped_guard(/wall_time_budget). shipped_guard(/cost_budget).
shipped_guard(/mcp_writes).
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

needs_approval(R, A, /quality, Reason) :-
  !guard_disabled(/context_drought), preflight(R, A), has_upstream(R, A), !usable_upstream(R, A), !upstream_produced_files(R, A),
  Reason = fn:string:concat("Context drought: agent '", A, "' would start, but its upstream agents provided no usable data (empty, [STATUS: NULL] or skipped).").

# -- post-flight: semantic null, protocol violation, hard errors ------------------------------------------------
needs_approval(R, A, /quality, Reason) :-
  !guard_disabled(/semantic_null), finished(R, A), status_tag(R, A, /null),
  Reason = fn:string:concat("Semantic null: agent '", A, "' reported [STATUS: NULL] (it found no data).").

Decl bypassed(Run, Agent) descr [doc("The agent justified not using its mandatory tool.")] bound [/string, /string].
bypassed(R, A) :- bypass(R, A, _).
needs_approval(R, A, /quality, Reason) :-
  !guard_disabled(/protocol_violation), finished(R, A), run_agent(R, A, Role), mandatory_tool(Role, Tool), !tool_executed(R, A, Tool), !bypassed(R, A),
  Reason = fn:string:concat("Protocol violation: agent '", A, "' did not execute ", fn:name:to_string(Tool), " (its role requires it) and gave no [BYPASS: ...] justification.").

needs_approval(R, A, /quality, Reason) :-
  !guard_disabled(/hard_error), hard_error(R, A, Message),
  Reason = fn:string:concat("Execution failure in agent '", A, "': ", Message).

# -- MCP tools in workflows: as the MCP guard's shipped policy, a tool that is not read-only waits for an operator --
needs_approval(R, A, /safety, Reason) :-
  !guard_disabled(/mcp_writes), tool_call(R, A, _, Tool, _), mcp_tool_of(Tool, Server, Name), !mcp_tool_read_only(Tool),
  Reason = fn:string:concat("The MCP tool ", Server, "/", Name, " is not marked read-only: an operator approves the call first.").

# -- on resume: a tool call in doubt (not a breaker one can disable: an effect must never repeat unasked) ----------
needs_approval(R, A, /safety, Reason) :-
  tool_in_doubt(R, A, Tool, Target),
  Reason = fn:string:concat("Tool call in doubt: ", Tool, " on '", Target, "' of agent '", A, "' was running when the driver stopped; it may or may not have taken effect. Execute runs the agent again (calls that finished are not repeated; this one may run again), Skip or Abort leaves it as it is.").

# -- post-flight: what the model sent besides its answer --------------------------------------------------------
needs_approval(R, A, /quality, Reason) :-
  !guard_disabled(/refusal), finished(R, A), model_refused(R, A, Text),
  Reason = fn:string:concat("Refusal: the model of agent '", A, "' refused: ", Text).
needs_approval(R, A, /quality, Reason) :-
  !guard_disabled(/native_tool_call), finished(R, A), native_tool_call(R, A, Tool),
  Reason = fn:string:concat("Protocol violation: agent '", A, "' called ", Tool, " as a native tool call; tools are requested in control_packet.tool_requests, so it did not run.").
needs_approval(R, A, /quality, Reason) :-
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
  leading_categories(R, A, C, Categories), Category = fn:list:get(Categories, 0), lead_candidate(R, A, C, Category, Reason)
  |> do fn:group_by(R, A, C, Category), let Reasons = fn:collect(Reason).

# Within the leading category, a reason of the guards' own rules leads over a cortex pattern's (a generic "an agent
# failed" pattern must not hide the breaker that tripped); a pattern's reason leads only where it is alone.
Decl own_reason(Run, Agent, Checkpoint, Category, Reason)
  descr [doc("A pausing approval derived by a guard rule, not by a cortex pattern.")]
  bound [/string, /string, /name, /name, /string].
own_reason(R, A, C, Category, Reason) :- pauses_now(R, A, C, Category, Reason), !pattern_approval(R, A, Category, Reason).
Decl has_own_reason(Run, Agent, Checkpoint, Category)
  descr [doc("Some guard rule's approval pauses here in this category.")] bound [/string, /string, /name, /name].
has_own_reason(R, A, C, Category) :- own_reason(R, A, C, Category, _).
Decl lead_candidate(Run, Agent, Checkpoint, Category, Reason)
  descr [doc("A reason the pause may lead with: the guards' own, else the patterns'.")]
  bound [/string, /string, /name, /name, /string].
lead_candidate(R, A, C, Category, Reason) :- own_reason(R, A, C, Category, Reason).
lead_candidate(R, A, C, Category, Reason) :-
  pauses_now(R, A, C, Category, Reason), !has_own_reason(R, A, C, Category).
Decl pause_leads_with(Run, Agent, Checkpoint, Category, Reason)
  descr [doc("The approval a pause leads with (its card, its hint, its explanation): exactly one per pausing checkpoint.")]
  bound [/string, /string, /name, /name, /string].
pause_leads_with(R, A, C, Category, Reason) :-
  leading_reasons(R, A, C, Category, Reasons), Reason = fn:list:get(Reasons, 0).

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
needs_approval(R, A, /quality, Reason) :-
  !guard_disabled(/token_budget), finished(R, A), run_usage(R, Tokens, _), run_budget(R, /max_tokens, Max), Tokens > Max,
  Reason = fn:string:concat("The run's token budget is spent: ", Tokens, " tokens used of ", Max, ".").
needs_approval(R, A, /quality, Reason) :-
  !guard_disabled(/time_budget), finished(R, A), run_usage(R, _, Seconds), run_budget(R, /max_model_seconds, Max), Seconds > Max,
  Reason = fn:string:concat("The run's time budget is spent: ", Seconds, " s in attempts of ", Max, " s.").
needs_approval(R, A, /quality, Reason) :-
  !guard_disabled(/wall_time_budget), finished(R, A), run_wall(R, Seconds), run_budget(R, /max_wall_seconds, Max), Seconds > Max,
  Reason = fn:string:concat("The run's wall-time budget is spent: running for ", Seconds, " s of ", Max, " s.").
needs_approval(R, A, /quality, Reason) :-
  !guard_disabled(/cost_budget), finished(R, A), run_cost(R, Cost), run_cost_budget(R, Max), Cost > Max,
  Reason = fn:string:concat("The run's cost budget is spent: ", Cost, " of ", Max, ".").
