"""Remote mode (docs/remote.md): runs on Temporal workers, records in PostgreSQL.

The top layer of the core and the only package that imports ``psycopg`` or
``temporalio``; local mode never imports it beyond ``config`` (which needs neither).
"""
