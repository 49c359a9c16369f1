# The action vocabulary: one table the policy, the router and the virtual store share.
# `groundstate kernel lint` fails if an action the policy can derive has no route, a route names no executor,
# or an executor is reachable from no action.

known_action(/read_file).     route(/read_file, /read_file).
known_action(/write_file).    route(/write_file, /write_file).      mutating(/write_file).
known_action(/edit_file).     route(/edit_file, /edit_file).        mutating(/edit_file).
known_action(/delete_file).   route(/delete_file, /delete_file).    mutating(/delete_file).
known_action(/list_files).    route(/list_files, /list_files).
known_action(/search_code).   route(/search_code, /search_code).
known_action(/search_files).  route(/search_files, /search_files).
known_action(/git_status).    route(/git_status, /git_status).
known_action(/git_diff).      route(/git_diff, /git_diff).
known_action(/git_log).       route(/git_log, /git_log).
known_action(/git_commit).    route(/git_commit, /git_commit).      mutating(/git_commit).
known_action(/run_tests).     route(/run_tests, /run_tests).
known_action(/build_project). route(/build_project, /build_project).
known_action(/execute_python). route(/execute_python, /execute_python).
known_action(/ask_user).      route(/ask_user, /ask_user).
known_action(/web_search).    route(/web_search, /web_search).
known_action(/delegate_coder).      route(/delegate_coder, /delegate).
known_action(/delegate_reviewer).   route(/delegate_reviewer, /delegate).
known_action(/delegate_researcher). route(/delegate_researcher, /delegate).

# Your own Python tools (@groundstate.tool): the runtime reports each one an agent may use as python_tool(/name);
# they are known actions, carried out by the python_tool executor (sandboxed unless the tool says otherwise).
known_action(T) :- python_tool(T).
route(T, /python_tool) :- python_tool(T).
# MCP tools a workflow gives its agents (tools: [mcp:SERVER/TOOL]), reported as mcp_tool(/SERVER__TOOL): carried out
# by the mcp_tool executor, which sends the call to the configured server.
known_action(T) :- mcp_tool(T).
route(T, /mcp_tool) :- mcp_tool(T).

# Aliases: other names models use for the same actions.
action_alias(/fs_read, /read_file).
action_alias(/fs_write, /write_file).
action_alias(/show_diff, /git_diff).

# Actions that run content of the workspace — model-written code, tests (conftest.py runs), the build. They always
# run in the OS sandbox; a policy may also require approval for them (see code_needs_approval in policy.mg).
executes_workspace_code(/execute_python). executes_workspace_code(/run_tests). executes_workspace_code(/build_project).

# Actions whose target is a workspace path (the constitution checks it before anything runs).
path_action(/read_file). path_action(/write_file). path_action(/edit_file). path_action(/delete_file).
path_action(/list_files). path_action(/run_tests). path_action(/git_diff). path_action(/git_log).
