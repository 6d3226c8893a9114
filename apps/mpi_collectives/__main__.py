"""Entry point: python -m apps.mpi_collectives."""

import sys

from .cli import main

sys.exit(main())
