"""Build the PDGEQRF driver (``pdgeqrf_driver.c``) with Debian's MPICH compiler wrapper.

The executable goes to ``apps/scalapack_qr/build/pdgeqrf_driver-<hash>`` where ``<hash>`` is a
digest of the source, the compiler and the flags, so a changed source is rebuilt on next use and
an unchanged one is not. The build dir is ignored by git.

On Debian the default ``mpicc``/``mpiexec`` alternatives may point to Open MPI; ScaLAPACK's
``libscalapack-mpich`` needs MPICH's, so the MPICH-specific names are used.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

__all__ = [
    "DEBIAN_PACKAGES",
    "MissingDependency",
    "BuildError",
    "SOURCE",
    "BUILD_DIR",
    "driver_path",
    "build_driver",
    "build_driver_with_table",
]

log = logging.getLogger(__name__)

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "pdgeqrf_driver.c"
BUILD_DIR = HERE / "build"

#: Debian packages the driver needs (compiler wrapper + mpiexec, ScaLAPACK, a threaded BLAS).
DEBIAN_PACKAGES = ("mpich", "libmpich-dev", "libscalapack-mpich-dev", "libopenblas0")
_INSTALL_HINT = "install them with: sudo apt-get install " + " ".join(DEBIAN_PACKAGES)

#: Compiler wrappers tried in order (the first that exists is used) unless $GPTASK_MPICC is set.
MPICC_CANDIDATES = ("/usr/bin/mpicc.mpich", "mpicc.mpich")
#: Linking only ScaLAPACK is enough: it pulls in LAPACK/BLAS (OpenBLAS via Debian alternatives).
LIBS = ("-lscalapack-mpich", "-lm")
CFLAGS = ("-O2", "-std=c99", "-Wall")
SCALAPACK_LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib")


class MissingDependency(RuntimeError):
    """The compiler or a library needed to build or run the driver is not installed."""


class BuildError(RuntimeError):
    """The compiler ran but failed; the message holds its output."""


def find_mpicc() -> str:
    """Path of MPICH's C compiler wrapper, or raise :class:`MissingDependency`."""
    env = os.environ.get("GPTASK_MPICC")
    candidates = (env,) if env else MPICC_CANDIDATES
    for c in candidates:
        path = shutil.which(c) if not os.path.isabs(c) else (c if os.access(c, os.X_OK) else None)
        if path:
            return path
    raise MissingDependency(
        f"scalapack_qr: no MPICH C compiler wrapper found (looked for {', '.join(candidates)}); "
        f"the driver needs the Debian packages {', '.join(DEBIAN_PACKAGES)}; {_INSTALL_HINT}"
    )


def _check_scalapack() -> None:
    if os.environ.get("GPTASK_MPICC"):
        return  # a custom wrapper is trusted to know where its ScaLAPACK is
    for d in SCALAPACK_LIB_DIRS:
        if Path(d, "libscalapack-mpich.so").exists():
            return
    raise MissingDependency(
        "scalapack_qr: libscalapack-mpich.so not found in "
        f"{', '.join(SCALAPACK_LIB_DIRS)}; it comes with the Debian package libscalapack-mpich-dev "
        f"(the driver needs {', '.join(DEBIAN_PACKAGES)}); {_INSTALL_HINT}"
    )


def _digest(mpicc: str) -> str:
    h = hashlib.sha256()
    h.update(SOURCE.read_bytes())
    h.update("\0".join((mpicc, *CFLAGS, *LIBS)).encode())
    return h.hexdigest()[:12]


def driver_path(mpicc: str | None = None) -> Path:
    """Where the executable for the current source lives (whether or not it is built yet)."""
    return BUILD_DIR / f"pdgeqrf_driver-{_digest(mpicc or find_mpicc())}"


def build_driver(force: bool = False) -> Path:
    """Return the path of an up-to-date driver executable, compiling it if needed.

    Raises :class:`MissingDependency` (naming the Debian packages) when the compiler or ScaLAPACK
    is missing, :class:`BuildError` when compilation fails.
    """
    mpicc = find_mpicc()
    _check_scalapack()
    exe = driver_path(mpicc)
    if exe.exists() and not force:
        return exe
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    # compile to a temporary name in the same directory, then rename: concurrent builders
    # (several tuning ranks) never see a half-written executable
    fd, tmp = tempfile.mkstemp(prefix=".pdgeqrf_driver-", dir=BUILD_DIR)
    os.close(fd)
    cmd = [mpicc, *CFLAGS, "-o", tmp, str(SOURCE), *LIBS]
    log.info("building the PDGEQRF driver: %s", " ".join(cmd))
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            out = (proc.stderr or proc.stdout).strip()
            hint = ""
            if "scalapack" in out.lower() or "mpi.h" in out:
                hint = f" (are the Debian packages {', '.join(DEBIAN_PACKAGES)} installed? {_INSTALL_HINT})"
            raise BuildError(f"scalapack_qr: compiling {SOURCE.name} failed{hint}:\n{out}")
        os.chmod(tmp, 0o755)
        os.replace(tmp, exe)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    for old in BUILD_DIR.glob("pdgeqrf_driver-*"):
        if old != exe:
            try:
                old.unlink()
            except OSError:
                pass
    return exe


def build_driver_with_table(header: str | os.PathLike, out: str | os.PathLike) -> Path:
    """Compile the driver with a selection table (the C header of ``gptask export-table --format
    c-header``, default prefix ``gptask_table``) into the executable ``out``: its ``--lookup M N``
    prints the table's configuration for M x N, and ``--from-table M N REPEATS`` runs it (see the
    driver's usage). Raises :class:`MissingDependency`, or :class:`BuildError` with the compiler's
    output (e.g. a header of another problem, without mb/nb/nproc/p/nth)."""
    mpicc = find_mpicc()
    _check_scalapack()
    header, out = Path(header).resolve(), Path(out)
    if not header.is_file():
        raise BuildError(f"scalapack_qr: no selection table header at {header}")
    cmd = [mpicc, *CFLAGS, f"-DPDGEQRF_SELECTION_TABLE=\"{header.name}\"", f"-I{header.parent}", "-o", str(out),
           str(SOURCE), *LIBS]
    log.info("building the PDGEQRF driver with a selection table: %s", " ".join(cmd))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise BuildError(f"scalapack_qr: compiling {SOURCE.name} with the table {header} failed:\n"
                         f"{(proc.stderr or proc.stdout).strip()}")
    return out
