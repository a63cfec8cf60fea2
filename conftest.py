# The repository's own pytest configuration: load the conformance plugin when xpspec is not
# installed as a distribution (the pytest11 entry point covers the installed case).
import importlib.metadata

try:
    importlib.metadata.distribution("xpspec")
except importlib.metadata.PackageNotFoundError:
    pytest_plugins = ["xpspec.conformance.pytest_plugin"]
