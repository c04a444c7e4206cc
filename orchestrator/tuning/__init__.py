"""Host tuning: knobs (THP, numad, IO scheduler, sysctls, Erlang schedulers), checked and applied."""
