"""The protocol core: everything an implementation needs to speak to the conformance suite,
and nothing else. Standard library only (no torch, no reference implementation; msgspec,
when installed, reads trace lines faster, :mod:`~xpspec.protocol.event_reader`), so that the
suite, the reference trainer and every adapter depend on it and not on each other; a
non-Python implementation needs only its JSON Schemas (:mod:`xpspec.protocol.schemas`).

- :mod:`~xpspec.protocol.scenario` — the scenarios the suite runs, with
  :mod:`~xpspec.protocol.env_spec`, :mod:`~xpspec.protocol.schedule`,
  :mod:`~xpspec.protocol.config` (the trainer's knobs), :mod:`~xpspec.protocol.preprocessors`,
  :mod:`~xpspec.protocol.sampling` and :mod:`~xpspec.protocol.budget`;
- :mod:`~xpspec.protocol.trace` — the trace an implementation returns, and its events;
  :mod:`~xpspec.protocol.codec` — their canonical JSON;
- :mod:`~xpspec.protocol.identity` — how toy observations encode ``(env, episode, t)``;
  :mod:`~xpspec.protocol.step_type`; :mod:`~xpspec.protocol.errors`;
- :mod:`~xpspec.protocol.adapter` — the adapter protocol and its capability vocabulary;
- :mod:`~xpspec.protocol.worker` — the out-of-process harness: a worker reads one JSON request
  per line on its standard input and writes one JSON response per line on its standard output
  (``docs/protocol.md``).
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
