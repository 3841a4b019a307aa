"""``python -m spindle.worker.replay FILE...``: replay history files, report failures."""

import sys

from spindle.worker.replay.replayer import main

sys.exit(main())
