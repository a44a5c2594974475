"""Ready-made glue between toolguard and agent frameworks.

Each module needs its framework (an extra of ``toolguard-hitl``) and turns a
toolguard :class:`~toolguard.Toolset` (or a list of functions and tools) into
the framework's own tools, so a guarded call becomes the framework's own
pause and a reviewer's decisions resume it with toolguard's guarantees.
"""
