"""An adapter module that cannot be imported (harness tests: fail fast)."""

import a_framework_that_is_not_installed  # noqa: F401
