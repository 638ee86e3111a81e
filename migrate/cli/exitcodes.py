"""Exit codes, decided in one place so CI can rely on them.

0  success (for `check`: no blockers)
1  the tool failed: bad input, unreachable or forbidden cluster, internal error
2  the command ran and found what the user must act on (for `check`: blockers)
"""

OK = 0
FAILED = 1
ACTION_NEEDED = 2
