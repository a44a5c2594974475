"""The HTTP API through real HTTP clients."""
