"""toolguard serve."""
