import os
import sys
from pathlib import Path

import numpy as np
import pytest

import gptask.models.linalg as la

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture
def root() -> Path:
    return ROOT


@pytest.fixture
def factor_sizes(monkeypatch):
    """Record the size of every Cholesky factorisation made through linalg.robust_cholesky."""
    sizes = []
    real = la.robust_cholesky

    def recording(K, what="covariance matrix"):
        sizes.append(np.shape(K)[0])
        return real(K, what)

    monkeypatch.setattr(la, "robust_cholesky", recording)
    return sizes
