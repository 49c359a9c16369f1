"""groundstate.policies — a policy tried before it decides: ``groundstate policy test`` runs test files of expected
decisions against the shipped rules plus yours, exactly as ``mcp serve`` loads them, and reports what was derived
instead and which rules no test reaches."""

from .cases import Case, CaseFile, PolicyTestError, load_case_file
from .mcp_cases import CaseResult, Coverage, run_mcp_cases

__all__ = ["Case", "CaseFile", "CaseResult", "Coverage", "PolicyTestError", "load_case_file", "run_mcp_cases"]
