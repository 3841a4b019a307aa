"""The sections of ``spindle.shared.platform.settings.Settings``, one class each.

``Settings`` inherits them all; each section is a plain model of its fields, so a
section changes alone. The public path stays ``spindle.shared.platform.settings``
(and ``spindle.settings``).
"""
