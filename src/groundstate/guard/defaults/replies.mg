# What a model behind `groundstate gateway --gate` says in its control packet, as facts, decided before a word of
# its surface reaches the client. Your rule files (`[gateway] rules`) add reasons to refuse a reply through
# reply_refused/1; any derived reason cuts the reply (an in-band error the SDK raises). These rules ship none: the
# packet gate itself already refuses replies that break the protocol.

Decl reply_intent(Category, Verb, Target, Constraint)
  descr [doc("The reply's intent_classification (category /query, /mutation or /instruction; the verb a name like /fix).")]
  bound [/name, /name, /string, /string].
Decl reply_confidence(Confidence)
  descr [doc("How sure the model says it is, 0 to 1.")] bound [/float64].
Decl reply_tool_request(Tool, Argument)
  descr [doc("A tool the packet requests (its tool_requests entries), with its argument.")] bound [/string, /string].
Decl reply_update(Text)
  descr [doc("A mangle_updates entry the kernel's schemas accepted.")] bound [/string].
Decl reply_asks_approval(Asks)
  descr [doc("The packet's safety_gates.requires_user_approval: /true or /false.")] bound [/name].
Decl reply_blocked(Reason)
  descr [doc("The packet's safety_gates.dangerous_action_blocked: what the model says it refused to do.")] bound [/string].

Decl reply_refused(Reason) descr [doc("The reply is cut, for this reason.")] bound [/string].
