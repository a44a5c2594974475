"""The approval page in headless Chromium."""
