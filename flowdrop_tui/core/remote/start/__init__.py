"""The start path: the client's request in PostgreSQL (``fd_starts``), and the
forwarder in each worker that starts the key's workflow.
"""
