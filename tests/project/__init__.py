"""The project as a whole: docs, examples, scripts, the public API, the layers."""
