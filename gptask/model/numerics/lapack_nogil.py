"""Cholesky factorisation and inverse from the factor (LAPACK dpotrf, dpotri) with the GIL released.

scipy.linalg.lapack's wrappers hold the GIL while LAPACK runs, so an LCM fit whose starts run on
worker threads factorised one start at a time: two threads doing dpotrf + dpotri at N = 1,000
took 0.94x the time of one after the other (BENCHMARKS.md, issue 16), and half of a likelihood
evaluation is these two calls. Here the same routines of the same library are called through
ctypes, which releases the GIL for the call: the function pointers are the ones scipy exports for
Cython (``scipy.linalg.cython_lapack``, 32-bit integers). The arrays and the call are those of
``lapack.dpotrf(a, lower=1)`` on a Fortran-ordered array, so the results are the same bit for bit.
Where the pointers cannot be had (another scipy build), scipy's wrappers are used instead.
"""

from __future__ import annotations

import ctypes
import logging
from typing import Callable

import numpy as np
from scipy.linalg import lapack

logger = logging.getLogger(__name__)

_Routine = Callable[..., None]


def _routine(name: str) -> _Routine | None:
    """LAPACK ``name(uplo, n, a, lda, info)`` from scipy's Cython exports, or None if unavailable."""
    try:
        from scipy.linalg import cython_lapack

        capsule = cython_lapack.__pyx_capi__[name]
        get_name = ctypes.pythonapi.PyCapsule_GetName
        get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
        get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
        get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
        pointer = get_pointer(capsule, get_name(capsule))
    except (ImportError, AttributeError, KeyError, ValueError) as exc:
        logger.debug("LAPACK %s without the GIL is unavailable (%s): using scipy's wrapper", name, exc)
        return None
    int_p = ctypes.POINTER(ctypes.c_int)
    return ctypes.CFUNCTYPE(None, ctypes.c_char_p, int_p, ctypes.c_void_p, int_p, int_p)(pointer)


_DPOTRF = _routine("dpotrf")
_DPOTRI = _routine("dpotri")


def _call(routine: _Routine, A: np.ndarray) -> int:
    n, info = ctypes.c_int(A.shape[0]), ctypes.c_int(0)
    routine(b"L", ctypes.byref(n), A.ctypes.data, ctypes.byref(n), ctypes.byref(info))
    return info.value


def _check(A: np.ndarray) -> None:
    if A.dtype != np.float64 or not A.flags.f_contiguous or not A.flags.writeable \
            or A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError("expected a writeable, Fortran-ordered, square float64 array")


def potrf_lower(A: np.ndarray) -> int:
    """Overwrite the lower triangle of A (n, n), Fortran-ordered float64, with the Cholesky factor
    of the symmetric matrix it holds (the strict upper triangle is neither read nor changed).
    Returns LAPACK's info: 0 on success, k > 0 when the leading minor of order k is not positive
    definite."""
    _check(A)
    if _DPOTRF is not None:
        return _call(_DPOTRF, A)
    _, info = lapack.dpotrf(A, lower=1, clean=0, overwrite_a=1)
    return int(info)


def potri_lower(A: np.ndarray) -> int:
    """Overwrite the lower triangle of A (n, n), Fortran-ordered float64, holding a lower Cholesky
    factor L, with the lower triangle of (L L^T)^-1. Returns LAPACK's info (0 on success)."""
    _check(A)
    if _DPOTRI is not None:
        return _call(_DPOTRI, A)
    _, info = lapack.dpotri(A, lower=1, overwrite_c=1)
    return int(info)


def zero_strict_upper(A: np.ndarray, block: int = 256) -> None:
    """Set the strict upper triangle of the square array A to zero, in place, in column blocks
    (no n x n temporary: the rows above each block, then the block's diagonal square)."""
    n = A.shape[0]
    for j0 in range(0, n, block):
        j1 = min(n, j0 + block)
        A[:j0, j0:j1] = 0.0
        A[j0:j1, j0:j1] = np.tril(A[j0:j1, j0:j1])
