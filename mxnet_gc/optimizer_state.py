"""An MXNet optimizer and its states as data (plain_data.py): what workers send the servers, and the files of
a checkpoint, read without unpickling anything.

MXNet pickles the optimizer it sends to its servers and the states it saves (``Updater.get_states``);
a pickle runs code when loaded, so a tampered file, or any process that reaches a server, could run
code there.  Here an optimizer travels as its class name and attributes: the servers rebuild only MXNet's
own optimizers and learning-rate schedulers (``for_servers`` refuses others, saying to run the optimizer
on the workers), and a worker restores a checkpoint's attributes into the optimizer it already has
(which may be the user's own class).  Like MXNet's pickle, the attributes leave out ``param_dict`` (the
trainer's Parameters); for the servers its learning-rate and weight-decay multipliers are kept in
``lr_mult`` and ``wd_mult`` by index (MXNet's servers lose them).
"""
import mxnet as mx

from . import checkpoint_files, plain_data

FORMAT = "mxnet_gc optimizer states 1"


def builtin_classes():
    """MXNet's own optimizers and learning-rate schedulers: the classes the servers rebuild."""
    optimizers = set(mx.optimizer.Optimizer.opt_registry.values())
    schedulers = {c for c in vars(mx.lr_scheduler).values()
                  if isinstance(c, type) and issubclass(c, mx.lr_scheduler.LRScheduler)}
    return tuple(c for c in optimizers | schedulers if c.__module__.startswith("mxnet."))


def _attributes(optimizer):
    return {k: v for k, v in vars(optimizer).items() if k != "param_dict"}


def for_servers(optimizer):
    """The optimizer as JSON for the servers; ValueError for one they could not rebuild."""
    if not isinstance(optimizer, mx.optimizer.Optimizer):
        raise TypeError("the optimizer for the servers must be an mxnet.optimizer.Optimizer, got a %s"
                        % type(optimizer).__name__)
    builtin = builtin_classes()
    for what, obj in (("optimizer", optimizer), ("learning-rate scheduler", optimizer.lr_scheduler)):
        if obj is not None and type(obj) not in builtin:
            raise ValueError("the %s is a %s, not one of MXNet's own: the servers rebuild only those (mxnet_gc "
                             "sends no code to them); run the optimizer on the workers (gluon.Trainer(..., "
                             "update_on_kvstore=False))" % (what, plain_data.class_name(obj)))
    attributes = _attributes(optimizer)
    params = getattr(optimizer, "param_dict", None) or {}
    for table in ("lr_mult", "wd_mult"):
        attributes[table] = {**(attributes.get(table) or {}), **{i: getattr(p, table) for i, p in params.items()}}
    try:
        return plain_data.encode_object(optimizer, attributes)
    except plain_data.NotPlainData as e:
        raise ValueError("the optimizer %s holds a value the servers cannot be sent as data: %s; run it on the "
                         "workers (update_on_kvstore=False)" % (plain_data.class_name(optimizer), e)) from None


def from_workers(data):
    """The optimizer ``for_servers`` described, rebuilt (MXNet's own classes only)."""
    optimizer = plain_data.decode(data, classes=builtin_classes())
    if not isinstance(optimizer, mx.optimizer.Optimizer):
        raise ValueError("not an optimizer: a %s" % plain_data.class_name(optimizer))
    optimizer.param_dict = {}
    return optimizer


def save(path, states, optimizer=None, extra=None):
    """Writes ``states`` ({index: state}, NDArrays and tuples of them), if given the optimizer's attributes,
    and ``extra`` (a dict of numpy arrays, such as a server's weight gaps) to ``path`` (an .npz with its
    checksum)."""
    arrays = {}
    meta = {"format": FORMAT, "states": plain_data.encode(states, arrays),
            "optimizer": None if optimizer is None else plain_data.encode_object(optimizer, _attributes(optimizer), arrays),
            "extra": plain_data.encode(extra or {}, arrays)}
    checkpoint_files.write_arrays(path, meta, arrays)


def load(path, into=None):
    """(states, optimizer, extra) of a file ``save`` wrote.  The saved optimizer's attributes are written into
    ``into`` (the optimizer the caller has, of the same class) when given, else a new optimizer is rebuilt
    (MXNet's own classes only); None if the file holds no optimizer."""
    meta, arrays = checkpoint_files.read_arrays(path)
    if meta.get("format") != FORMAT:
        raise checkpoint_files.CorruptCheckpoint("checkpoint file %s holds %r, not optimizer states" % (path, meta.get("format")))
    try:
        states = plain_data.decode(meta["states"], arrays)
        extra = plain_data.decode(meta["extra"], arrays)
        optimizer = None
        if meta["optimizer"] is not None:
            optimizer = plain_data.decode(meta["optimizer"], arrays, builtin_classes(), into=into)
            if into is None:
                optimizer.param_dict = {}
    except ValueError as e:
        raise checkpoint_files.CorruptCheckpoint("checkpoint file %s: %s" % (path, e)) from None
    if not isinstance(states, dict) or not isinstance(extra, dict):
        raise checkpoint_files.CorruptCheckpoint("checkpoint file %s: its states are not a dict" % path)
    return states, optimizer, extra
