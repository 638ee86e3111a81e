"""The command line: parses options, calls the core, renders, chooses the exit code."""
