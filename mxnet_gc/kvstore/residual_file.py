"""The file of a worker's error-feedback state (``StoreBase.save_residuals``): an .npz holding one array
per chunk of a key (named ``chunk_name``), the residuals a changed compression left for a key's next push
(``owed_name``), a key's residual of the compressed pull on the ring (``pull_name``), LGC's arrays, and a
JSON ``__meta__`` (the compression, the number of servers, where the store's own step count was, LGC's
state); written and read by checkpoint_files.write_arrays and read_arrays."""


def chunk_name(key, index):
    return "%r/%d" % (key, index)


def owed_name(key):
    return "owed/%r" % (key,)


def pull_name(key):
    """A key's residual of the compressed pull (the Horovod store's owners', whole)."""
    return "pull/%r" % (key,)


def restore(fname, meta, arrays, items, num_servers):
    """Copies the saved residual of each (key, chunk index, NDArray) of ``items`` into its array; a chunk
    missing or of another size raises ValueError naming it (and the servers, when their number is why)."""
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
