"""SCM-GRPO (structural-graph rewards for multi-hop fact verification) on trl; names resolve lazily.

``core`` (stdlib parser, graph, depth and reward math), ``rewards`` (trl reward callables), ``prompt``,
``data`` (HoVer / EX-FEVER loaders, synthetic world, dataset checks), ``analysis`` (accuracy by depth),
``warm_start`` (the verdict-weighted SFT loss), ``config`` and ``trainer`` (thin ``GRPOConfig`` /
``GRPOTrainer`` wiring). The benchmark and its tiny world model are ``benchmarks/scm_grpo`` in the source
repository.
"""

from hf_ext._lazy import lazy_package

__getattr__, __dir__ = lazy_package(__name__)
