# bench/decision: the same policy as policy.mg, with the MCP guard's shipped rules (mcp.mg) written in Rego.
package guard

import rego.v1

user_roles := {"alice": {"admin"}, "bob": {"developer"}, "carol": {"viewer"}, "dave": {"developer", "viewer"}}

role_grants := {
	"viewer": {"git/git_status", "git/git_log", "time/get_current_time"},
	"developer": {"git/git_status", "git/git_log", "git/git_add", "git/git_commit"},
	"admin": {"git/git_status", "git/git_log", "git/git_add", "git/git_commit", "git/git_reset", "time/get_current_time"},
}

read_only := {"git/git_status", "git/git_log", "time/get_current_time"}

destructive := {"git/git_add", "git/git_commit", "git/git_reset"}

tool := sprintf("%s/%s", [input.server, input.tool])

may_use if {
	some role in user_roles[input.client]
	tool in role_grants[role]
}

denied contains reason if {
	not user_roles[input.client]
	reason := sprintf("unknown user %s", [input.client])
}

denied contains reason if {
	user_roles[input.client]
	not may_use
	reason := sprintf("%s has no role that grants %s", [input.client, tool])
}

denied contains reason if {
	startswith(input.arguments.repo_path, "/etc")
	reason := sprintf("the repository %s is under /etc", [input.arguments.repo_path])
}

needs_approval contains reason if {
	tool in destructive
	reason := sprintf("%s may destroy data (the server marks it destructive): an operator approves it first", [tool])
}

needs_approval contains reason if {
	not tool in read_only
	not tool in destructive
	reason := sprintf("%s changes things (it is not read-only): an operator approves it first", [tool])
}

permitted contains reason if {
	tool in read_only
	reason := sprintf("%s is read-only", [tool])
}

verdict := {"decision": "deny", "reasons": denied} if count(denied) > 0

verdict := {"decision": "approve", "reasons": needs_approval} if {
	count(denied) == 0
	count(needs_approval) > 0
}

verdict := {"decision": "permit", "reasons": permitted} if {
	count(denied) == 0
	count(needs_approval) == 0
	count(permitted) > 0
}

verdict := {"decision": "deny", "reasons": {"no rule permits this call"}} if {
	count(denied) == 0
	count(needs_approval) == 0
	count(permitted) == 0
}
