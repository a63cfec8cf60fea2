"""``python -m xpspec.conformance.vectors --write|--check``."""

from xpspec.conformance.vectors import main

raise SystemExit(main())
