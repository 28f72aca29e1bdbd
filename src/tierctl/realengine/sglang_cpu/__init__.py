"""A folder put first on the real SGLang's ``PYTHONPATH``: it holds :mod:`sgl_kernel`, tierctl's
stand-in for sgl-kernel's CPU build (not published on PyPI). Nothing here is imported by tierctl
itself; the engine's interpreter imports ``sgl_kernel`` from this folder."""
