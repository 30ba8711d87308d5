"""The file of a worker's error-feedback state (``StoreBase.save_residuals``): an .npz holding one array
per chunk of a key (named ``chunk_name``), the residuals a changed compression left for a key's next push
(``owed_name``), a key's residual of the compressed pull on the ring (``pull_name``), LGC's arrays, and a
JSON ``__meta__`` (the compression, the number of servers, where the store's own step count was, LGC's
state); written and read by checkpoint_files.write_arrays and read_arrays."""
import numpy as np


def chunk_name(key, index):
    return "%r/%d" % (key, index)


def owed_name(key):
    return "owed/%r" % (key,)


def pull_name(key):
    """A key's residual of the compressed pull (the Horovod store's owners', whole)."""
    return "pull/%r" % (key,)


def recut(arrays, items):
    """``arrays`` with each key's saved chunks cut again as ``items`` cuts the key, where they differ and hold
    as many values in all (a residual of one value per value: saved by a store that cut the key otherwise,
    such as the other transport, or the parameter server's cut for its pull's stages)."""
    by_key = {}
    for k, i, residual in items:
        by_key.setdefault(k, []).append((i, residual.size))
    arrays = dict(arrays)
    for k, chunks in by_key.items():
        if all(chunk_name(k, i) in arrays and arrays[chunk_name(k, i)].size == n for i, n in chunks):
            continue
        saved, i = [], 0
        while chunk_name(k, i) in arrays:
            saved.append(arrays[chunk_name(k, i)].ravel())
            i += 1
        if saved and sum(a.size for a in saved) == sum(n for _, n in chunks):
            whole = np.concatenate(saved)
            for j in range(i):
                del arrays[chunk_name(k, j)]
            begin = 0
            for j, n in sorted(chunks):
                arrays[chunk_name(k, j)], begin = whole[begin:begin + n], begin + n
    return arrays


def restore(fname, meta, arrays, items, num_servers, per_value=False):
    """Copies the saved residual of each (key, chunk index, NDArray) of ``items`` into its array (``per_value``:
    residuals of one value per value, which a key cut otherwise when saved is cut again to fit); a chunk
    missing or of another size raises ValueError naming it (and the servers, when their number is why)."""
    items = list(items)
    if per_value:
        arrays = recut(arrays, items)
    for k, i, residual in items:
        name = chunk_name(k, i)
        if name not in arrays or arrays[name].size != residual.size:
            servers, cause = meta.get("servers"), ""
            if servers and num_servers and servers != num_servers:
                cause = ("; it was saved by a job with %d server(s), this one has %d (a key of at least "
                         "MXNET_GC_BIGARRAY_BOUND values is cut into parts per server): resume with %d"
                         % (servers, num_servers, servers))
            raise ValueError("%s does not match this store's keys (chunk %d of key %r: %s)%s"
                             % (fname, i, k, "missing" if name not in arrays else
                                "%d values saved, %d here" % (arrays[name].size, residual.size), cause))
        residual[:] = arrays[name].reshape(residual.shape)
