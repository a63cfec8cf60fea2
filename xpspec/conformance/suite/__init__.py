"""The conformance suite as pytest tests: ``pytest --pyargs xpspec.conformance.suite --adapter NAME``."""
