# groundstate default policy: the executive (what to do next), the constitution (whether it is permitted),
# the router's view (how it is carried out) and the OODA phase. Python reports facts and obeys what is derived.

# -- intents ----------------------------------------------------------------------------------------------
Decl pending_intent(IntentID)
  descr [doc("Perceived but not yet turned into actions by the executive.")].
pending_intent(I) :- user_intent(I, _, _, _, _), !executive_processed_intent(I).

Decl clarification_needed(IntentID)
  descr [doc("The intent is too uncertain or its target cannot be found: ask the user instead of acting.")].
clarification_needed(I) :- intent_confidence(I, C), C < 0.5.
clarification_needed(I) :- user_intent(I, /mutation, _, _, _), focus_resolution(I, _, _, /missing).

Decl ambiguity_flag(IntentID, Kind, Detail)
  descr [doc("Why an intent is ambiguous, for the user interface.")]
  bound [/name, /name, /string].
ambiguity_flag(I, /low_confidence, "the intent classification is uncertain") :- intent_confidence(I, C), C < 0.5.
ambiguity_flag(I, /missing_target, T) :- focus_resolution(I, T, _, /missing).

# The verbs this policy acts on by itself; anything else is handled by explicit requests.
intent_action(/explain, /read_file).
intent_action(/read, /read_file).
intent_action(/list, /list_files).
intent_action(/search, /search_code).
intent_action(/find, /search_files).
intent_action(/test, /run_tests).
intent_action(/build, /build_project).
intent_action(/status, /git_status).
intent_action(/diff, /git_diff).
intent_action(/history, /git_log).
intent_action(/fix, /delegate_coder).
intent_action(/refactor, /delegate_coder).
intent_action(/implement, /delegate_coder).
intent_action(/review, /delegate_reviewer).
intent_action(/research, /delegate_researcher).

# -- the executive: next_action(Source, ActionType, Target, Payload) ---------------------------------------
Decl next_action(Source, ActionType, Target, Payload)
  descr [doc("What should happen next, and which intent or request it comes from. Consumed by the executive.")]
  bound [/name, /name, /string, /string].
next_action(I, Type, Target, "") :-
  pending_intent(I), I = /current_intent,
  user_intent(I, _, Verb, Target, _), intent_action(Verb, Type), !clarification_needed(I).
next_action(I, /ask_user, Target, "Which file or symbol do you mean, and what should change?") :-
  pending_intent(I), I = /current_intent, user_intent(I, _, _, Target, _), clarification_needed(I).
next_action(R, Type, Target, Payload) :-
  requested_action(R, Type, Target, Payload), !request_consumed(R).

# -- the constitution ------------------------------------------------------------------------------------
Decl resolved_action(ActionType, Canonical)
  descr [doc("An action type with its alias resolved.")] bound [/name, /name].
Decl is_alias(ActionType) descr [doc("ActionType is an alias.")] bound [/name].
is_alias(A) :- action_alias(A, _).
resolved_action(T, T) :- known_action(T), !is_alias(T).
resolved_action(A, T) :- action_alias(A, T).

Decl approved_action(ActionID)
  descr [doc("Approved: by the user (user_approved), or because it answers a request an operator approved as that exact call (request_approved, reported by the runtime).")]
  bound [/name].
approved_action(A) :- user_approved(A).
approved_action(A) :- action_source(A, S), request_approved(S).

Decl requires_user_approval(ActionID, Reason)
  descr [doc("The action may run only after the user approves it.")] bound [/name, /string].
requires_user_approval(A, "deleting a file") :- pending_action(A, Type, _, _, _), resolved_action(Type, /delete_file).
requires_user_approval(A, "committing to the repository") :- pending_action(A, /git_commit, _, _, _).
requires_user_approval(A, "the model asked for approval") :-
  pending_action(A, Type, _, _, _), mutating(Type), model_requests_approval(/current_intent).

# Running workspace content is sandboxed by default and needs no approval. To require it, add to your policy:
#   code_needs_approval(T) :- executes_workspace_code(T).
Decl code_needs_approval(ActionType)
  descr [doc("Running this kind of workspace content requires the user's approval (none by default).")]
  bound [/name].
requires_user_approval(A, "running workspace content (model-written code or tests)") :-
  pending_action(A, Type, _, _, _), resolved_action(Type, T), code_needs_approval(T).

Decl chesterton_fence_warning(ActionID, Message)
  descr [doc("A change to a file modified in the last two hours: someone may have had a reason.")]
  bound [/name, /string].
chesterton_fence_warning(A, Message) :-
  pending_action(A, Type, Target, _, _), resolved_action(Type, T), mutating(T),
  file_age(Target, Age), Age < 7200,
  Message = fn:string:concat(Target, " was modified ", fn:number:to_string(Age), " seconds ago").

Decl denied(ActionID, Reason) descr [doc("Why the constitution refuses an action.")] bound [/name, /string].
denied(A, "unknown action type") :- pending_action(A, Type, _, _, _), !known_action(Type), !is_alias(Type).
denied(A, "the target is outside the workspace") :-
  pending_action(A, Type, Target, _, _), resolved_action(Type, T), path_action(T), workspace_path(Target, /outside).
denied(A, "the target is not a valid workspace path") :-
  pending_action(A, Type, Target, _, _), resolved_action(Type, T), path_action(T), workspace_path(Target, /invalid).
denied(A, Reason) :-
  requires_user_approval(A, R), !approved_action(A), Reason = fn:string:concat("requires user approval: ", R).

Decl has_denial(ActionID) descr [doc("At least one reason to refuse.")].
has_denial(A) :- denied(A, _).

Decl permission_check_result(ActionID, Decision, Reason, Millis)
  descr [doc("The constitution's decision on each pending action: /permit or /deny, with the reason.")]
  bound [/name, /name, /string, /number].
permission_check_result(A, /deny, R, T) :- pending_action(A, _, _, _, T), denied(A, R).
permission_check_result(A, /permit, "no rule denies it", T) :- pending_action(A, _, _, _, T), !has_denial(A).

Decl action_permitted(ActionID) descr [doc("Permitted, keyed by ActionID (never by action type).")].
action_permitted(A) :- permission_check_result(A, /permit, _, _).
Decl action_blocked(ActionID, Reason) descr [doc("Denied, with the reason.")] bound [/name, /string].
action_blocked(A, R) :- permission_check_result(A, /deny, R, _).
Decl awaiting_approval(ActionID, Reason)
  descr [doc("Denied only until the user approves.")] bound [/name, /string].
awaiting_approval(A, R) :- requires_user_approval(A, R), !approved_action(A).

# -- the router's view ----------------------------------------------------------------------------------
Decl route_for(ActionID, Executor)
  descr [doc("An executor the routing table gives for a permitted action.")] bound [/name, /name].
route_for(A, E) :- route_option(A, _, E).
Decl route_option(ActionID, Kind, Executor)
  descr [doc("A canonical kind and executor the routing table gives for a permitted action.")]
  bound [/name, /name, /name].
route_option(A, T, E) :- action_permitted(A), pending_action(A, Type, _, _, _), resolved_action(Type, T), route(T, E).
Decl route_ambiguous(ActionID)
  descr [doc("The table gives a permitted action more than one route: the router takes none of them.")]
  bound [/name].
route_ambiguous(A) :- route_option(A, T, _), route_option(A, U, _), T != U.
route_ambiguous(A) :- route_option(A, _, E), route_option(A, _, F), E != F.
Decl chosen_route(ActionID, Kind, Executor)
  descr [doc("The one route the router takes: its canonical kind and executor.")] bound [/name, /name, /name].
chosen_route(A, T, E) :- route_option(A, T, E), !route_ambiguous(A).
Decl has_route_option(ActionID) descr [doc("The table gives the action at least one route.")] bound [/name].
has_route_option(A) :- route_option(A, _, _).
Decl routing_problem(ActionID, Reason)
  descr [doc("Why the router cannot carry out a permitted action (recorded as its routing_error).")]
  bound [/name, /string].
routing_problem(A, R) :-
  action_permitted(A), !has_route_option(A), pending_action(A, Type, _, _, _),
  R = fn:string:concat("no route for ", fn:name:to_string(Type)).
routing_problem(A, R) :-
  route_ambiguous(A), pending_action(A, Type, _, _, _),
  R = fn:string:concat("several routes for ", fn:name:to_string(Type), ": the routing table must give exactly one").
Decl routed(ActionID) descr [doc("The router has handled the action.")].
routed(A) :- routing_result(A, _, _, _).
Decl awaiting_routing(ActionID) descr [doc("Permitted and not yet routed.")].
awaiting_routing(A) :- action_permitted(A), !routed(A).

# -- what became of an action ---------------------------------------------------------------------------
Decl permit_recorded(ActionID) descr [doc("The router acted on a permit for the action.")] bound [/name].
permit_recorded(A) :- permit_record(A, _, _).
Decl has_permission_result(ActionID) descr [doc("The constitution decided on the action.")] bound [/name].
has_permission_result(A) :- permission_check_result(A, _, _, _).
Decl final_decision(ActionID, Decision, Reason)
  descr [doc("The decision an action's report and archive show: the permit the router acted on (it stands after the approval that allowed it is gone), else the constitution's current decision."),
         fundep([ActionID], [Decision])]
  bound [/name, /name, /string].
final_decision(A, /permit, R) :- permit_record(A, R, _).
final_decision(A, D, R) :- permission_check_result(A, D, R, _), !permit_recorded(A).
final_decision(A, /deny, "no permission decision") :-
  pending_action(A, _, _, _, _), !has_permission_result(A), !permit_recorded(A).
Decl settled(ActionID)
  descr [doc("The envelope's outcome is final — routed, or refused for a reason no approval can change — so retention may move it to cold storage.")]
  bound [/name].
settled(A) :- routed(A).
settled(A) :- pending_action(A, _, _, _, _), !awaiting_approval(A, _), !awaiting_routing(A).

# -- observability ---------------------------------------------------------------------------------------
Decl some_action_awaiting_routing() descr [doc("Any permitted action not yet routed.")].
some_action_awaiting_routing() :- awaiting_routing(_).
Decl current_ooda_phase(Phase)
  descr [doc("/decide while the current intent awaits the executive, /act while permitted actions await the router, /observe otherwise."),
         fundep([], [Phase])]
  bound [/name].
current_ooda_phase(/decide) :- pending_intent(/current_intent).
current_ooda_phase(/act) :- !pending_intent(/current_intent), some_action_awaiting_routing().
current_ooda_phase(/observe) :- !pending_intent(/current_intent), !some_action_awaiting_routing().
