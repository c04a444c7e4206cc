"""Before any test module is imported: Airflow's home for this test process (Airflow reads its
configuration when first imported, by whichever test that is); and hypothesis's profile for mutation
testing (`make mutate`), where a property that fails has killed its mutant and need not be shrunk; and the
test products, enabled for the suite."""

from hypothesis import Phase, settings

import orchestrator.testing
import tests.airflow_home  # noqa: F401

# The fakes are products no inventory may select until code enables them: this suite's tests use them.
orchestrator.testing.enable()

# No deadline per example: `make test` runs the unit suite beside the integration suite (scripts/test), whose
# JVMs may hold both cores for a moment; a slow example there is the machine's, not the code's. A property that
# must be quick says so in its own test.
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")
settings.register_profile("mutation", parent=settings.get_profile("suite"),
                          phases=[Phase.explicit, Phase.reuse, Phase.generate])
