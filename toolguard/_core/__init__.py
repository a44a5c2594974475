"""The base every layer uses: errors, wire records, JSON values, limits, the text catalog, audit
events.
"""
