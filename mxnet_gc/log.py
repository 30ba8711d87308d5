"""mxnet_gc's logger, ``logging.getLogger('mxnet_gc')``: what the library reports (the dense warm-up, phase
switches, the threshold groups, the merge plan, LGC's estimates); the servers log to ``mxnet_gc.server``.

As a library it adds only a NullHandler: its lines go where the application's logging sends them (for
example ``logging.basicConfig(level=logging.INFO)``), and nowhere when it configures none.  Once a store
knows this worker's rank it gives the logger a level, unless the application gave it one: INFO on rank
0, WARNING on the other workers (so that a job's W workers do not print each line W times).  ``show()``
prints its lines to standard output as ``mxnet_gc: <message>``, as the examples and tools do.

``warn`` issues a warning attributed to the user's line: the first caller outside mxnet_gc and MXNet.
"""
import importlib.util
import inspect
import logging
import os
import sys
import warnings

logger = logging.getLogger("mxnet_gc")
logger.addHandler(logging.NullHandler())

# mxnet_gc's and MXNet's folders: a warning is attributed to the first frame outside them
_LIBRARIES = tuple(os.path.dirname(path) + os.sep for path in
                   (__file__, getattr(importlib.util.find_spec("mxnet"), "origin", None) or __file__))


def set_up(rank):
    """Gives the logger its default level for ``rank`` (INFO on rank 0, WARNING elsewhere), unless it has one."""
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.INFO if rank == 0 else logging.WARNING)


def show(stream=None):
    """Prints the logger's lines to ``stream`` (standard output by default) as ``mxnet_gc: <message>``, and
    no longer passes them on to the application's handlers (which would print them again)."""
    handler = logging.StreamHandler(stream or sys.stdout)
    handler.setFormatter(logging.Formatter("mxnet_gc: %(message)s"))
    logger.addHandler(handler)
    logger.propagate = False


def warn(message, category=UserWarning):
    """``warnings.warn(message, category)`` attributed to the user's line that led here (the first frame
    outside mxnet_gc and MXNet; this module's caller at the end of the process, when there is none)."""
    level, frame = 2, inspect.currentframe().f_back
    while frame is not None and frame.f_code.co_filename.startswith(_LIBRARIES):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level if frame is not None else 2)
