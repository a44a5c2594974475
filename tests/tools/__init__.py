"""Tools, guards and the classifier."""
