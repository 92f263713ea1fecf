"""Remote records in PostgreSQL: the schema, ``PostgresStore``, the words for a
failed login, the files every worker of a space shares, a space's name and its
notice settings, the queued starts a replica lists.
"""
