"""The application layer: what a command (or a Python caller) asks for, wired from the parts.

It opens a target (inventory, product plug-in, procedure, adapter), plans, runs preflight,
starts or resumes the engine with the journal and the lock, and reads status and summaries.
The CLI only parses options, calls one function here and renders what it returns.
"""
