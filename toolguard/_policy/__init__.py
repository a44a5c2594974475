"""What a tool's policy says: argument rules, redaction, ``when=`` predicates, one-shot grants,
decision checks.
"""
