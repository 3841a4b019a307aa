"""``spindle chat``: a run in the terminal."""
