"""Code both sides share, imported as ``spindle.shared``: pure contracts and graph logic,
then the I/O packages (platform, bus, store, tasks, temporal) built on them.
"""
