# This folder ships inside the package as orchestrator.shipped.tuning (see pyproject.toml), so an
# installed orchestrator finds its default tuning profiles without a source checkout.
