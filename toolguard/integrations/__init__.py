"""Adapters that plug toolguard into agent frameworks, one module per framework.

Each module needs its framework (an optional extra, e.g.
``pip install "toolguard-hitl[langchain]"``); importing it without that extra
fails with an ``ImportError`` that names the extra to install.
"""
