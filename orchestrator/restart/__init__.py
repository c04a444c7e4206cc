"""The rolling restart: plan (pure), safety (pure), journal, engine (the state machine), steps."""
