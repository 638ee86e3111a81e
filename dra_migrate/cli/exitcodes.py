"""Exit codes, decided in one place (`main.Group`) so CI can rely on them (README "Exit codes").

0    success (`check`: no blockers; `diff`: no differences; `plan --detailed-exitcode`: applicable)
1    the tool failed: a usage error, bad input, an unreachable or forbidden cluster, an internal error
2    the command ran and found what the user must act on: `check` blockers, `diff` differences or drift,
     `plan --detailed-exitcode` a plan that is not applicable (Terraform's `-detailed-exitcode` gives 2 for
     "changes present"; kubectl and Terraform exit 1 on usage errors, so a typo never reads as a finding)
130  interrupted (Ctrl-C), as a shell reports SIGINT (128 + 2)
143  terminated (SIGTERM: a Job's pod deleted or evicted, `timeout`, a cancelled CI job), as a shell reports
     SIGTERM (128 + 15); 129 hung up (SIGHUP: the terminal gone); the command stopped as it stops on Ctrl-C
     (`cli/interrupts.py`)
"""

OK = 0
FAILED = 1
ACTION_NEEDED = 2
INTERRUPTED = 130
TERMINATED = 143
HUNG_UP = 129
BY_SIGNAL = {15: TERMINATED, 1: HUNG_UP}  # the signals cli/interrupts.py stops a command on
