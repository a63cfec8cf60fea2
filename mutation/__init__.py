"""Mutation testing of refimpl's semantic modules against the conformance suite.

Not shipped (outside the packages ``pyproject.toml`` includes): ``python -m mutation`` (the
``mutation`` nox session) makes mutants of refimpl with cosmic-ray, runs the suite against
each in a copy of the tree, classifies each run as killed by a failing check, red for
another reason, or survived, and writes the table in ``docs/mutation.md`` from the committed
data of this folder (``results.jsonl``, ``equivalent.toml``, ``survivors.toml``).
"""

__all__: list[str] = []
