"""The base layer: errors, records, the text catalog, reveal, digests."""
