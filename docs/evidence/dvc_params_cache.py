"""Measurement only (docs/tests.md): `python docs/evidence/dvc_params_cache.py status` runs DVC with its params
file reads cached per (file, keys) in the process, to measure what the per-stage reads cost. Not used by the pipeline."""
import functools, sys
import dvc.utils.serialize as ser
from dvc.dependency import param
orig = param.read_param_file
cache = {}
def cached(fs, path, key_paths=None, flatten=False, **kw):
    k = (path, tuple(key_paths or ()), flatten, tuple(sorted(kw.items())))
    if k not in cache:
        cache[k] = orig(fs, path, key_paths, flatten, **kw)
    return cache[k]
param.read_param_file = cached
from dvc.cli import main
sys.exit(main(sys.argv[1:]))
