# The benchmark's policy beside the shipped one: writes run without an operator (so that utility is measured), and
# what stops an injected effect is the shipped flows.mg alone — nothing here names a suite, a tool or a value.
mcp_unattended(C, "the benchmark lets writes run unattended: provenance decides") :- mcp_call(C, _, _, _, _).
