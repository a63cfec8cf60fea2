"""Adapters: one module per implementation, each driving that implementation's own code.

:data:`REGISTERED` maps the names accepted by ``--adapter`` to ``module:object`` paths; any
other ``package.module:object`` path works too, so an adapter can live in another repository.
"""

__all__ = ["REGISTERED"]

REGISTERED: dict[str, str] = {
    "refimpl": "xpspec.refimpl.adapter:RefimplAdapter",
    "sb3": "xpspec.adapters.sb3:SB3Adapter",
    "tianshou": "xpspec.adapters.tianshou:TianshouAdapter",
    "torchrl": "xpspec.adapters.torchrl:TorchRLAdapter",
    "flashbax": "xpspec.adapters.flashbax:FlashbaxAdapter",
    "rllib": "xpspec.adapters.rllib:RLlibAdapter",
    "alf": "xpspec.adapters.alf:ALFAdapter",
}
