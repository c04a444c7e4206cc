"""Before any test module is imported: Airflow's home for this test process (Airflow reads its
configuration when first imported, by whichever test that is)."""

import tests.airflow_home  # noqa: F401
