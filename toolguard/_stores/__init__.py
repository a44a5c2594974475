"""Where threads live: the store protocol, memory, SQLite and PostgreSQL, and the notification
outbox.
"""
