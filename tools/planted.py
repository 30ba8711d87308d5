"""A pickle that does something when loaded: what a tampered checkpoint file or a stranger's message would
carry.  The tests and the fault matrix plant it where mxnet_gc reads files and messages, and check that
nothing ran (``ran``)."""
import os
import pickle


class Planted:
    """Unpickling it creates the file ``path`` (through ``open``: no shell)."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return open, (self.path, "w")

    def pickle(self, protocol=None):
        return pickle.dumps(self, protocol)

    def ran(self):
        """Whether a load of the pickle ran its code."""
        return os.path.exists(self.path)
