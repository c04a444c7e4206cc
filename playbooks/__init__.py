# This folder ships inside the package as orchestrator.shipped.playbooks (see pyproject.toml), so an
# installed orchestrator finds its default playbooks without a source checkout.
