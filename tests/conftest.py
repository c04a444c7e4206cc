"""Before any test module is imported: Airflow's home for this test process (Airflow reads its
configuration when first imported, by whichever test that is); and hypothesis's profile for mutation
testing (`make mutate`), where a property that fails has killed its mutant and need not be shrunk; and the
test products, enabled for the suite."""

from hypothesis import Phase, settings

import orchestrator.testing
import tests.airflow_home  # noqa: F401

# The fakes are products no inventory may select until code enables them: this suite's tests use them.
orchestrator.testing.enable()

settings.register_profile("mutation", phases=[Phase.explicit, Phase.reuse, Phase.generate])
