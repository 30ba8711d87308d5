"""The arguments of the stores' calls, checked: init's keys and values (agreed by every worker), push's
gradients and pull's outputs (initialized keys, their shapes, float32)."""
from . import agreement, arguments


class CheckedArguments:
    """StoreBase's argument checks (a part of the class: it reads ``_shapes`` and ``agree``)."""

    def _start_checks(self):
        self._checked = {}  # key -> the arrays last checked for it (see _check)

    def _targets(self, key, out):
        """{key: [output arrays]} of a pull, checked."""
        targets = dict(arguments.pull_targets(key, out))
        for k, t in targets.items():
            self._check("pull", k, t)
        return targets

    def _init_arguments(self, key, value, reduce_only, groups):
        """(keys, initial arrays, groups) of an init call, checked, in the canonical order of agreement.py,
        after every worker has said it initializes the same keys with the same shapes (a collective): the
        stores place keys in that order, so that a key's messages are the same on every worker whatever
        order each lists its keys in."""
        pairs = arguments.initial_values(key, value)
        for k, _ in pairs:
            if k in self._shapes:
                raise ValueError("key %r is already initialized" % (k,))
        pairs.sort(key=lambda p: agreement.key_order(p[0]))
        keys, values = [k for k, _ in pairs], [v for _, v in pairs]
        config = agreement.init_config(keys, [v.shape for v in values], reduce_only, groups)
        self.agree("keys", config)
        return keys, values, config["groups"]

    def _check(self, what, key, arrays):
        """Raises unless ``key`` is initialized and ``arrays`` have its shape and are float32.  The arrays
        passed last for a key are remembered: the same objects again (a trainer's gradients, every step)
        need no check."""
        last = self._checked.get(key)
        if last is not None and len(last) == len(arrays) and all(a is b for a, b in zip(last, arrays)):
            return
        self._check_initialized(key)
        arguments.check_arrays(what, key, arrays, self._shapes[key])
        self._checked[key] = list(arrays)

    def _check_initialized(self, key):
        if key not in self._shapes:
            raise ValueError("key %r is not initialized (call init first)" % (key,))
