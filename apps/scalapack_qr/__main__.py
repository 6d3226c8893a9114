"""``python -m apps.scalapack_qr {evaluate,tune,grid,build}``; see ``cli.py``."""

import sys

from .cli import main

sys.exit(main())
