"""``python -m conformance.vectors --write|--check``."""

from conformance.vectors import main

raise SystemExit(main())
