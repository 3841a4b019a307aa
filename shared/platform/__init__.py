"""Process plumbing every side uses: settings, connections, logging, metrics, tracing."""
