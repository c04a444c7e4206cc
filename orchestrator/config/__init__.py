"""Typed configuration: inventories, playbooks and tuning profiles, validated up front."""
