"""Adapters of real frameworks: one module per framework, each driving that framework's own
code, with its expectations file beside it (``NAME.expectations.toml``).

Each is registered under its name as an entry point of the group ``xpspec.adapters`` (in
xpspec's ``pyproject.toml``), as the reference adapter ``refimpl`` is and as any installed
package can register its own; the conformance suite finds them there and never imports this
package.
"""

__all__: list[str] = []
