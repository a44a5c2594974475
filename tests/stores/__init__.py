"""The stores: one contract for memory, SQLite and PostgreSQL; durability; the outbox."""
