"""Schedules: graph runs Temporal starts on a cron or interval (see docs/schedules.md)."""
