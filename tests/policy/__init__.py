"""A tool's policy: rules, redaction, decision checks, stand-in reviewers."""
