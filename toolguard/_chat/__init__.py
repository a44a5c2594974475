"""The chat use case: ``ReviewedChat``."""
