"""The OpenAI adapters through the real openai client and a local scripted server."""
