"""Reaching hosts: transports (SSH, local) and the service manager on top of them."""
