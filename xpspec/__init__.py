"""xpspec: an executable specification of what an RL trainer does with experience.

:mod:`xpspec.protocol` is the protocol core: what an implementation needs to speak to the
conformance suite from another process (the worker protocol and its JSON Schemas). It
depends on the standard library only.
"""

__all__: list[str] = []
