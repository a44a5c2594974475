"""Tools as the model sees them: plain and schema tools, the registry and its classifier."""
