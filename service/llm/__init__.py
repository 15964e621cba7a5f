"""The OpenAI-compatible LLM client (the only package that calls the model)."""
