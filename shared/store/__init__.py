"""MongoDB: the run archive, run documents and traces, files, API keys."""
