"""Remote mode (issue 17): runs on Temporal workers, records in PostgreSQL.

Only this package imports ``temporalio`` and ``psycopg``; local mode never imports it."""
