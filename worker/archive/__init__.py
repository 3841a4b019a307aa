"""The worker's archive writes: they never fail a run while MongoDB is down.

- ``operations``: the writes (messages, run updates, node reports) as queueable operations;
- ``outbox``: the Redis list they wait in when MongoDB cannot take them, and its design;
- ``catch_up``: the archiver that drains the outbox in batches, one per worker process;
- ``writes``: how the poster and the recorder write through the outbox attached to an archive.
"""
