"""The protocol core: how the conformance suite talks to an implementation running in a
worker process, in any language (``docs/protocol.md``). Standard library only.

A worker reads one JSON request per line on its standard input and writes one JSON response
per line on its standard output; everything else it prints goes to standard error. The
messages are described by the JSON Schemas in :mod:`xpspec.protocol.schemas`.
"""

from xpspec.protocol.schemas import load_schema, schema_names
from xpspec.protocol.worker import (
    OPERATIONS,
    PROTOCOL,
    ProtocolError,
    Request,
    Response,
    decode_request,
    decode_response,
    encode,
)

__all__ = [
    "OPERATIONS",
    "PROTOCOL",
    "ProtocolError",
    "Request",
    "Response",
    "decode_request",
    "decode_response",
    "encode",
    "load_schema",
    "schema_names",
]
