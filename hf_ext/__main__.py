"""``python -m hf_ext`` runs the ``hf-ext`` command line."""

import sys

from hf_ext.cli import main

sys.exit(main())
