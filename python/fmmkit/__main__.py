"""python -m fmmkit: the fmmkit command."""
import sys

from ._cli import main

sys.exit(main())
