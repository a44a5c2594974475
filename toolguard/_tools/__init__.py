"""Tools as the model sees them: plain and schema tools, the registry and its classifier."""

from toolguard._tools.schema_tool import SchemaTool
from toolguard._tools.tool import Tool

Tool._schema_tool = SchemaTool  # what Tool.from_schema builds
