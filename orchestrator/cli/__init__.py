"""The `orchestrate` command. Only this package prints and chooses exit codes."""
