"""Riak KV: the adapter (riak-admin over SSH), its parsed status, the plan and the steps of a run."""
