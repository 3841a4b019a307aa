"""The ``spindle`` command."""
