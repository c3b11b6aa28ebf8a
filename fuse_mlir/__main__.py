"""``python -m fuse_mlir ...`` is the ``fuse`` command (works without the scripts folder on PATH)."""

import sys

from fuse_mlir.cli.fuse import main

sys.exit(main())
