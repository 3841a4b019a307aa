"""The embedded development stack behind ``spindle dev``."""
