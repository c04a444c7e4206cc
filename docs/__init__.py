# This folder ships inside the package as orchestrator.shipped.docs (see pyproject.toml): `orchestrate
# docs TOPIC` shows a guide from an installed orchestrator, without a source checkout.
