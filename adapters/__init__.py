"""Adapters: one module per implementation, each driving that implementation's own code.

:data:`REGISTERED` maps the names accepted by ``--adapter`` to ``module:object`` paths; any
other ``package.module:object`` path works too, so an adapter can live in another repository.
"""

__all__ = ["REGISTERED"]

REGISTERED: dict[str, str] = {
    "refimpl": "adapters.refimpl:RefimplAdapter",
    "sb3": "adapters.sb3:SB3Adapter",
    "tianshou": "adapters.tianshou:TianshouAdapter",
    "torchrl": "adapters.torchrl:TorchRLAdapter",
    "flashbax": "adapters.flashbax:FlashbaxAdapter",
    "rllib": "adapters.rllib:RLlibAdapter",
    "alf": "adapters.alf:ALFAdapter",
}
