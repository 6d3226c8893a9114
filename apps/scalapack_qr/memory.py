"""Memory per process of the PDGEQRF driver, computed as the driver computes it (no run).

The driver (``pdgeqrf_driver.c``) reports ``"memory"``: the largest number of bytes any process
allocates for the factorisation. Per process at grid coordinates ``(r, c)``:

* the local matrix twice (the original and the copy factored): ``LLD * max(LOCc, 1)`` doubles
  each, ``LOCr = NUMROC(M, MB, r, 0, P)``, ``LOCc = NUMROC(N, NB, c, 0, Q)``, ``LLD = max(LOCr, 1)``;
* ``TAU``: ``LOCc + NB`` doubles;
* PDGEQRF's workspace from its query, plus one: ``NB * (Mp0 + Nq0 + NB) + 1`` doubles
  (ScaLAPACK's ``LWMIN`` with ``IA = JA = 1``: ``Mp0 = LOCr``, ``Nq0 = LOCc``);
* the timings: ``REPEATS`` doubles.

:func:`memory_per_process` is the largest of these sums over the ``P x Q`` processes (tested
against the driver's own output). The residual check allocates a third local matrix and PDORMQR's
workspace on top; the driver reports those apart (``"memory_check"``).
"""

from __future__ import annotations

__all__ = ["numroc", "memory_per_process", "DOUBLE_BYTES"]

DOUBLE_BYTES = 8


def numroc(n: int, nb: int, iproc: int, isrcproc: int, nprocs: int) -> int:
    """ScaLAPACK's NUMROC: how many of ``n`` rows (or columns) in blocks of ``nb`` process
    ``iproc`` of ``nprocs`` holds, the first block on ``isrcproc``."""
    mydist = (nprocs + iproc - isrcproc) % nprocs
    nblocks = n // nb
    out = (nblocks // nprocs) * nb
    extra = nblocks % nprocs
    if mydist < extra:
        out += nb
    elif mydist == extra:
        out += n % nb
    return out


def memory_per_process(m: int, n: int, mb: int, nb: int, p: int, q: int, repeats: int = 1) -> int:
    """Bytes the driver's largest process allocates for an ``m x n`` PDGEQRF on a ``p x q`` grid
    with ``mb x nb`` blocks and ``repeats`` timed factorisations (module docstring)."""
    for name, v in (("m", m), ("n", n), ("mb", mb), ("nb", nb), ("p", p), ("q", q), ("repeats", repeats)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"memory_per_process: {name} must be a positive integer, got {v!r}")
    best = 0
    for r in range(p):
        rows = numroc(m, mb, r, 0, p)
        lld = max(rows, 1)
        for c in range(q):
            cols = numroc(n, nb, c, 0, q)
            lwork = nb * (rows + cols + nb) + 1
            doubles = 2 * lld * max(cols, 1) + (cols + nb) + lwork + repeats
            best = max(best, doubles * DOUBLE_BYTES)
    return best
