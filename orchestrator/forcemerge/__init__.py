"""Force-merge after bulk indexing: few large segments, identical across replicas (seed 002)."""
