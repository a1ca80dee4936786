"""`python -m sarcasmd_soak` runs the soak (the same as sarcasmd-soak)."""
import sys

from .cli import main

sys.exit(main())
