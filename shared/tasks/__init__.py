"""Seed 003 tasks: their MongoDB store, their event stream, push notifications."""
