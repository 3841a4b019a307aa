"""Authentication: API keys, bearer JWTs and signed stream tokens → ``Identity``."""
