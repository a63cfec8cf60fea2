import sys

from xpspec.conformance.cli import main

sys.exit(main())
