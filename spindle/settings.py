"""Spindle's settings: one ``Settings`` for every process, read from the environment.

The public path for code that configures Spindle (tests, embedding, plug-ins)::

    from spindle.settings import Settings, get_settings

    settings = get_settings()  # SPINDLE_* variables and a .env file
    print(settings.redis_url)

Every field, its variable and its default are listed in the configuration table of
docs/operations/configuration.md, generated from this class.
"""

from spindle.shared.platform.settings import Settings, get_settings

__all__ = ["Settings", "get_settings"]
