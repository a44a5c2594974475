"""toolguard demo."""
