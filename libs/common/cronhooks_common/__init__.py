"""Shared library of the cronhooks services: settings, database, events, broker, security."""
