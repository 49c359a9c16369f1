# Loaded into the kernel of one agent invocation: the agent may use only the tools its workflow gives it.
Decl agent_may_use(ActionType)
  descr [doc("A tool the workflow gives this agent.")] bound [/name].
denied(A, "the workflow does not give this agent that tool") :-
  pending_action(A, Type, _, _, _), resolved_action(Type, T), !agent_may_use(T).

# An agent acts only through the tool requests it makes (each is a ToolCall event the guards see first): an action
# the kernel would derive from the intent's verb alone is refused here.
denied(A, "agents act only through tool_requests, not through the intent's verb") :-
  action_source(A, /current_intent).
