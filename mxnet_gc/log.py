"""mxnet_gc's logger, ``logging.getLogger('mxnet_gc')``: what the library reports (phase switches, the
threshold groups, the merge plan, LGC's estimates).

Once a store knows this worker's rank it sets the logger up, unless the application already gave it a
level or a handler: rank 0 at INFO, the other workers at WARNING, to standard output as
``mxnet_gc: <message>``.  Configure it as any logger (``logging.getLogger('mxnet_gc').setLevel(...)``)
to change that; the servers log to ``mxnet_gc.server``.
"""
import logging
import sys

logger = logging.getLogger("mxnet_gc")


def set_up(rank):
    """Gives the logger its default level for ``rank`` and a handler, unless it has either already."""
    if logger.handlers or logger.level != logging.NOTSET:
        return
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("mxnet_gc: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO if rank == 0 else logging.WARNING)
    logger.propagate = False
