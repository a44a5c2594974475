"""The ``toolguard`` command line."""
