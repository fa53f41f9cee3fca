"""Data-quality suites per layer (Great Expectations); the layers call them inside their jobs."""
