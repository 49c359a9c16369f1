# groundstate kernel schemas: every predicate the kernel, its policy and the model may use.
#
# Descriptors: doc("...") says what a fact means; model_writable() puts the predicate on the default allowlist of
# predicates a control packet's mangle_updates may assert (everything else is written only by the kernel).
# Names (/foo) are Mangle name constants; timestamps are Unix milliseconds.

# -- perception: the current turn ----------------------------------------------------------------------------
Decl user_intent(IntentID, Category, Verb, Target, Constraint)
  descr [doc("The intent of a turn. The live one is always /current_intent; perception retracts the previous one.")]
  bound [/name, /name, /name, /string, /string].
Decl intent_confidence(IntentID, Confidence)
  descr [doc("How sure perception is of the intent, 0.0 to 1.0.")]
  bound [/name, /float64].
Decl processed_intent(IntentID)
  descr [doc("Perception has turned the control packet into facts for this intent.")].
Decl executive_processed_intent(IntentID)
  descr [doc("The executive has turned this intent's next actions into pending actions.")].
Decl focus_resolution(IntentID, Target, Resolved, Kind)
  descr [doc("The intent's target resolved in the workspace: Kind is /file, /directory, /missing, /outside or /codebase.")]
  bound [/name, /string, /string, /name].
Decl model_requests_approval(IntentID)
  descr [doc("The model's own safety_gates asked for user approval; the constitution honours it.")].
Decl current_time(Millis)
  descr [doc("The kernel's clock for this turn; replaced, never accumulated.")]
  bound [/number].

# -- what the model may state -------------------------------------------------------------------------------
Decl task_status(TaskID, Status)
  descr [doc("A task's status: /pending, /in_progress, /complete or /failed."), model_writable()]
  bound [/name, /name].
Decl file_state(Path, State)
  descr [doc("What the model believes about a file: /clean, /read, /modified or /deleted."), model_writable()]
  bound [/string, /name].
Decl diagnostic(Severity, Path, Line, Code, Message)
  descr [doc("A compiler or linter finding the model reports: /error or /warning."), model_writable()]
  bound [/name, /string, /number, /string, /string].
Decl shard_state(ShardID, State)
  descr [doc("A shard's state: /spawned, /executing, /completed or /failed."), model_writable()]
  bound [/name, /name].
Decl requested_action(RequestID, ActionType, Target, Payload)
  descr [doc("A tool call the model made in control_packet.tool_requests (the only channel for effects; never assertable from mangle_updates); policy decides whether it happens. Payload is JSON text.")]
  bound [/name, /name, /string, /string].
Decl request_consumed(RequestID)
  descr [doc("The executive has turned this request into a pending action.")].

# -- the action envelope: one ActionID from decision to result -------------------------------------------
Decl pending_action(ActionID, ActionType, Target, Payload, Millis)
  descr [doc("An action the executive took from next_action/4; everything about it is keyed by ActionID.")]
  bound [/name, /name, /string, /string, /number].
Decl action_source(ActionID, Source)
  descr [doc("Where a pending action came from: /current_intent (the intent's verb) or the /request/N it answers.")]
  bound [/name, /name].
Decl request_approved(RequestID)
  descr [doc("An operator approved this exact request: the runtime reports it for a call identical to one the operator let through by retrying the pause that held it. Never assertable from mangle_updates.")]
  bound [/name].
Decl user_approved(ActionID)
  descr [doc("The user approved an action that required approval.")].
Decl routing_result(ActionID, Status, Details, Millis)
  descr [doc("The router's outcome: /success (Details names the executor) or /failure (Details says why).")]
  bound [/name, /name, /string, /number].
Decl permit_record(ActionID, Reason, Millis)
  descr [doc("The permission the router acted on, as it stood when the action ran (a derived permission may change later, e.g. under a new rule).")]
  bound [/name, /string, /number].
Decl routing_error(ActionID, ActionType, Reason)
  descr [doc("A permitted action the router could not route.")]
  bound [/name, /name, /string].
Decl execution_result(ActionID, ActionType, Status, Output, Millis)
  descr [doc("The virtual store's outcome: /success or /failure, with the (bounded) output.")]
  bound [/name, /name, /name, /string, /number].
Decl delegation(ActionID, Role, Task)
  descr [doc("A delegate_* action recorded for the runtime to carry out.")]
  bound [/name, /name, /string].
Decl user_question(ActionID, Question)
  descr [doc("An ask_user action: the question waiting for the user.")]
  bound [/name, /string].

# -- routing vocabulary (routes.mg) ----------------------------------------------------------------------
Decl known_action(ActionType)
  descr [doc("An action type the system knows; requested actions of other types are denied.")]
  bound [/name].
Decl python_tool(ActionType)
  descr [doc("A Python function registered with @groundstate.tool that this kernel may route (reported by the runtime).")]
  bound [/name].
Decl mcp_tool(ActionType)
  descr [doc("An MCP server's tool (SERVER__TOOL) a workflow gives the agent this kernel runs (reported by the runtime).")]
  bound [/name].
Decl route(ActionType, Executor)
  descr [doc("The router's table: which virtual-store executor carries out an action type.")]
  bound [/name, /name].
Decl action_alias(Alias, ActionType)
  descr [doc("Another spelling of an action type; routed as the action type.")]
  bound [/name, /name].
Decl mutating(ActionType)
  descr [doc("Actions that change the workspace or the repository.")]
  bound [/name].
Decl executes_workspace_code(ActionType)
  descr [doc("Actions that run workspace content (model-written code, tests, the build): always sandboxed; a policy can require approval for them.")]
  bound [/name].
Decl path_action(ActionType)
  descr [doc("Actions whose target is a path in the workspace.")]
  bound [/name].
Decl intent_action(Verb, ActionType)
  descr [doc("The action an intent's verb leads to.")]
  bound [/name, /name].

# -- memory -------------------------------------------------------------------------------------------
Decl session_note(Key, Value)
  descr [doc("A session-scoped note from a control packet's memory_operations (op: note); forgotten with the process.")]
  bound [/string, /string].

# -- facts served by the kernel on demand (external predicates) --------------------------------------------
Decl workspace_path(Target, Status)
  descr [doc("Where Target lies: /inside the workspace, /outside it, or /invalid (absolute, .., NUL)."), external(), mode("+", "-")]
  bound [/string, /name].
Decl file_age(Path, Seconds)
  descr [doc("Seconds since a workspace file was last modified (no fact if it does not exist)."), external(), mode("+", "-")]
  bound [/string, /number].
Decl recall_similar(Query, Key, Score)
  descr [doc("Vector memory: entries similar to Query, with their cosine similarity."), external(), mode("+", "-", "-")]
  bound [/string, /string, /float64].
Decl query_learned(Key, Value)
  descr [doc("Long-term memory: the value stored under Key."), external(), mode("+", "-")]
  bound [/string, /string].
