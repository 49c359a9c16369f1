# Loaded into the kernel of one agent invocation: the agent may use only the tools its workflow gives it.
Decl agent_may_use(ActionType)
  descr [doc("A tool the workflow gives this agent.")] bound [/name].
denied(A, "the workflow does not give this agent that tool") :-
  pending_action(A, Type, _, _, _), resolved_action(Type, T), !agent_may_use(T).
