"""Remote mode's tables and functions in PostgreSQL (docs/remote.md, "Schema").

Run whole by ``PostgresStore.ensure_schema`` under an advisory lock, when
``fd_schema.version`` is below ``SCHEMA_VERSION``: every statement is idempotent
(``IF NOT EXISTS``, ``CREATE OR REPLACE``), so a schema of any earlier version is
brought up to date. The functions raise SQLSTATE ``FD001`` (fenced: the message is
the key's current epoch), ``FD002`` (other bytes at an append's offset) and
``FD003`` (the key has a live run: the message is its id).
"""

from __future__ import annotations

# 2: fd_files.change_id (the feed keeps one row per whole file); 3: fd_reap_epoch;
# 4: fd_workers (each worker's lease: a run is reaped only once its worker is gone);
# 5: fd_starts (a client's start asked of the workers through PostgreSQL), fd_write_file
# writing the file's row once; 6: fd_bump ends the liveness of the runs it fences out
# (a key bumped by hand no longer shows its run running for good); fd_starts.asked_by
# (the database role that asked, set by a trigger), fd_grants, fd_may_operate (roles:
# docs/remote.md, "Who can do what"); 7: fd_notify (a space's notice settings, set by
# `remote config notify`, read by the worker that runs a run: docs/remote.md, "Notices");
# 8: fd_controls (a stop or pause asked through PostgreSQL, so a role's grants decide
# it: core/remote/start/controls.py)
SCHEMA_VERSION = 8

SCHEMA = """
CREATE TABLE IF NOT EXISTS fd_schema (version integer NOT NULL);
CREATE TABLE IF NOT EXISTS fd_keys (
    space text NOT NULL,
    key text NOT NULL,
    epoch bigint NOT NULL DEFAULT 0,
    live_run text,
    claimed_by text,
    PRIMARY KEY (space, key)
);
CREATE TABLE IF NOT EXISTS fd_runs (
    space text NOT NULL,
    run_id text NOT NULL,
    key text NOT NULL,
    epoch bigint NOT NULL,
    worker text,
    host text,
    pid integer,
    live boolean NOT NULL DEFAULT false,
    updated timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (space, run_id)
);
CREATE INDEX IF NOT EXISTS fd_runs_live ON fd_runs (space) WHERE live;
CREATE TABLE IF NOT EXISTS fd_files (
    space text NOT NULL,
    run_id text NOT NULL,
    relpath text NOT NULL,
    data bytea NOT NULL,
    PRIMARY KEY (space, run_id, relpath)
);
CREATE TABLE IF NOT EXISTS fd_lines (
    space text NOT NULL,
    run_id text NOT NULL,
    relpath text NOT NULL,
    seq bigint NOT NULL,
    data bytea NOT NULL,
    PRIMARY KEY (space, run_id, relpath, seq)
);
CREATE TABLE IF NOT EXISTS fd_changes (
    id bigserial PRIMARY KEY,
    space text NOT NULL,
    run_id text NOT NULL,
    kind text NOT NULL,
    relpath text,
    seq bigint,
    at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS fd_changes_space ON fd_changes (space, id);
-- the change row of a file's last whole write: the next one supersedes it
ALTER TABLE fd_files ADD COLUMN IF NOT EXISTS change_id bigint;
CREATE INDEX IF NOT EXISTS fd_changes_run ON fd_changes (space, run_id);

-- one row per worker id (workers serve every space): its lease, renewed every second
CREATE TABLE IF NOT EXISTS fd_workers (
    worker text PRIMARY KEY,
    token text NOT NULL,
    host text,
    pid integer,
    seen timestamptz NOT NULL DEFAULT now()
);

-- a start a client asked (core/remote/start/start_requests.py): asked -> forwarding (a
-- worker started its workflow) -> taken (a run_flow took it: once) -> answered, or
-- withdrawn (by its client, before it was taken); `forwarder` is the lease token of the
-- worker process forwarding it (another takes it over once that lease lapsed), `taker`
-- the Temporal run id of the workflow whose run_flow took it
CREATE TABLE IF NOT EXISTS fd_starts (
    id text PRIMARY KEY,
    space text NOT NULL,
    key text NOT NULL,
    namespace text NOT NULL,
    task_queue text NOT NULL,
    request jsonb NOT NULL,
    state text NOT NULL DEFAULT 'asked',
    forwarder text,
    taker text,
    answer jsonb,
    asked timestamptz NOT NULL DEFAULT now(),
    updated timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS fd_starts_open ON fd_starts (namespace, task_queue, asked)
    WHERE state IN ('asked', 'forwarding', 'taken');
ALTER TABLE fd_starts ADD COLUMN IF NOT EXISTS asked_by text;
CREATE TABLE IF NOT EXISTS fd_notify (
    space text PRIMARY KEY,
    settings jsonb NOT NULL,
    updated timestamptz NOT NULL DEFAULT now(),
    updated_by text NOT NULL DEFAULT current_user
);
CREATE TABLE IF NOT EXISTS fd_grants (
    space text NOT NULL,
    role text NOT NULL,
    kind text NOT NULL CHECK (kind IN ('operator')),
    PRIMARY KEY (space, role, kind)
);

-- who asked for a start is the database's to say, never the client's: the role that
-- inserted the row (whatever the row said), kept through every update
CREATE OR REPLACE FUNCTION fd_starts_asker() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        NEW.asked_by := current_user;
    ELSE
        NEW.asked_by := OLD.asked_by;
    END IF;
    RETURN NEW;
END $$;
CREATE OR REPLACE TRIGGER fd_starts_asker BEFORE INSERT OR UPDATE ON fd_starts
    FOR EACH ROW EXECUTE FUNCTION fd_starts_asker();

-- a stop or pause of a live run (core/remote/start/controls.py): the row is what the holding
-- worker acts on, once (it deletes it), and only when asked_by, set as for fd_starts,
-- may operate in the run's space; a request through Temporal alone names no row
CREATE TABLE IF NOT EXISTS fd_controls (
    id text PRIMARY KEY,
    space text NOT NULL,
    run_id text NOT NULL,
    verb text NOT NULL CHECK (verb IN ('stop', 'stop_now', 'pause')),
    asked timestamptz NOT NULL DEFAULT now(),
    asked_by text
);
CREATE OR REPLACE TRIGGER fd_controls_asker BEFORE INSERT OR UPDATE ON fd_controls
    FOR EACH ROW EXECUTE FUNCTION fd_starts_asker();

-- whether role p_role may have runs started in p_space: a superuser, the tables'
-- owner (a team that made no roles: everyone is the one role), or a member of a role
-- granted operator in the space (or in every space, '*') by a row of fd_grants
CREATE OR REPLACE FUNCTION fd_may_operate(p_space text, p_role text) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
DECLARE owner name; granted text;
BEGIN
    IF p_role IS NULL OR NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = p_role) THEN
        RETURN false;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = p_role AND rolsuper) THEN
        RETURN true;
    END IF;
    SELECT r.rolname INTO owner FROM pg_class c JOIN pg_roles r ON r.oid = c.relowner
     WHERE c.oid = 'fd_starts'::regclass;
    IF owner IS NOT NULL AND pg_has_role(p_role, owner, 'MEMBER') THEN
        RETURN true;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'flowdrop_admin')
       AND pg_has_role(p_role, 'flowdrop_admin', 'MEMBER') THEN
        RETURN true;
    END IF;
    FOR granted IN
        SELECT g.role FROM fd_grants g JOIN pg_roles r ON r.rolname = g.role
         WHERE g.space IN (p_space, '*') AND g.kind = 'operator'
    LOOP
        IF pg_has_role(p_role, granted, 'MEMBER') THEN
            RETURN true;
        END IF;
    END LOOP;
    RETURN false;
END $$;

CREATE OR REPLACE FUNCTION fd_worker_beat(
    p_worker text, p_token text, p_host text, p_pid integer, p_fresh double precision,
    p_take boolean
) RETURNS text LANGUAGE plpgsql AS $$
DECLARE held fd_workers%ROWTYPE;
BEGIN
    -- renew this process's lease on its worker id; another process's lease on it that
    -- is still fresh (seen within p_fresh seconds, by this server's clock) is refused
    -- with FD004 (the message: host, pid, seconds since seen) unless p_take
    INSERT INTO fd_workers (worker, token, host, pid) VALUES (p_worker, p_token, p_host, p_pid)
    ON CONFLICT (worker) DO NOTHING;
    SELECT * INTO held FROM fd_workers WHERE worker = p_worker FOR UPDATE;
    IF held.token <> p_token AND NOT p_take
       AND extract(epoch FROM now() - held.seen) < p_fresh THEN
        RAISE EXCEPTION USING ERRCODE = 'FD004', MESSAGE = format('%s %s %s',
            coalesce(held.host, '?'), coalesce(held.pid, 0),
            round(extract(epoch FROM now() - held.seen)::numeric, 1));
    END IF;
    UPDATE fd_workers SET token = p_token, host = p_host, pid = p_pid, seen = now()
     WHERE worker = p_worker;
    RETURN p_token;
END $$;

CREATE OR REPLACE FUNCTION fd_worker_age(p_worker text) RETURNS double precision
LANGUAGE sql STABLE AS $$
    -- seconds since the worker's lease was last renewed (NULL: never seen)
    SELECT extract(epoch FROM now() - seen)::double precision FROM fd_workers
     WHERE worker = p_worker
$$;

CREATE OR REPLACE FUNCTION fd_check_epoch(
    p_space text, p_key text, p_epoch bigint, p_update boolean
) RETURNS void LANGUAGE plpgsql AS $$
DECLARE current bigint;
BEGIN
    IF p_update THEN
        SELECT epoch INTO current FROM fd_keys
         WHERE space = p_space AND key = p_key FOR UPDATE;
    ELSE
        SELECT epoch INTO current FROM fd_keys
         WHERE space = p_space AND key = p_key FOR SHARE;
    END IF;
    IF current IS DISTINCT FROM p_epoch THEN
        RAISE EXCEPTION USING ERRCODE = 'FD001', MESSAGE = coalesce(current::text, 'none');
    END IF;
END $$;

CREATE OR REPLACE FUNCTION fd_new_change(
    p_space text, p_run text, p_kind text, p_relpath text, p_seq bigint
) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE new_id bigint;
BEGIN
    -- held to the commit: ids of one space are handed out in commit order
    PERFORM pg_advisory_xact_lock(hashtext('fd_changes'), hashtext(p_space));
    INSERT INTO fd_changes (space, run_id, kind, relpath, seq)
    VALUES (p_space, p_run, p_kind, p_relpath, p_seq) RETURNING id INTO new_id;
    PERFORM pg_notify('fd_changes', p_space);
    RETURN new_id;
END $$;

CREATE OR REPLACE FUNCTION fd_change(
    p_space text, p_run text, p_kind text, p_relpath text, p_seq bigint
) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM fd_new_change(p_space, p_run, p_kind, p_relpath, p_seq);
END $$;

CREATE OR REPLACE FUNCTION fd_file_end(p_space text, p_run text, p_relpath text)
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT coalesce(
        (SELECT seq + octet_length(data) FROM fd_lines
          WHERE space = p_space AND run_id = p_run AND relpath = p_relpath
          ORDER BY seq DESC LIMIT 1),
        (SELECT octet_length(data) FROM fd_files
          WHERE space = p_space AND run_id = p_run AND relpath = p_relpath),
        0)
$$;

CREATE OR REPLACE FUNCTION fd_put_file(
    p_space text, p_run text, p_relpath text, p_data bytea
) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO fd_files (space, run_id, relpath, data)
    VALUES (p_space, p_run, p_relpath, p_data)
    ON CONFLICT (space, run_id, relpath) DO UPDATE SET data = EXCLUDED.data;
    -- a whole write replaces what was appended before it
    DELETE FROM fd_lines WHERE space = p_space AND run_id = p_run AND relpath = p_relpath;
END $$;

CREATE OR REPLACE FUNCTION fd_write_file(
    p_space text, p_key text, p_epoch bigint, p_run text, p_relpath text, p_data bytea
) RETURNS void LANGUAGE plpgsql AS $$
DECLARE old_change bigint; new_change bigint;
BEGIN
    PERFORM fd_check_epoch(p_space, p_key, p_epoch, false);
    SELECT change_id INTO old_change FROM fd_files
     WHERE space = p_space AND run_id = p_run AND relpath = p_relpath;
    -- the change row first, so the file's row is written once, with its change id (a
    -- key set's commit: one new version of the file's row, not two)
    new_change := fd_new_change(p_space, p_run, 'file', p_relpath, NULL);
    INSERT INTO fd_files (space, run_id, relpath, data, change_id)
    VALUES (p_space, p_run, p_relpath, p_data, new_change)
    ON CONFLICT (space, run_id, relpath)
    DO UPDATE SET data = EXCLUDED.data, change_id = EXCLUDED.change_id;
    -- a whole write replaces what was appended before it
    DELETE FROM fd_lines WHERE space = p_space AND run_id = p_run AND relpath = p_relpath;
    -- a key set a second ago is superseded by this one: the feed keeps one row per
    -- file, not one per key set (a replica behind it reads the newest whole file)
    DELETE FROM fd_changes WHERE id = old_change AND kind = 'file';
END $$;

CREATE OR REPLACE FUNCTION fd_append_line(
    p_space text, p_key text, p_epoch bigint, p_run text, p_relpath text, p_data bytea,
    p_offset bigint
) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE at_offset bigint;
BEGIN
    PERFORM fd_check_epoch(p_space, p_key, p_epoch, false);
    -- the writer owns the file and says where its bytes landed; appends from two
    -- connections of one writer may commit in either order (a reader stops at a gap)
    at_offset := coalesce(p_offset, fd_file_end(p_space, p_run, p_relpath));
    INSERT INTO fd_lines (space, run_id, relpath, seq, data)
    VALUES (p_space, p_run, p_relpath, at_offset, p_data)
    ON CONFLICT (space, run_id, relpath, seq) DO NOTHING;
    IF NOT FOUND THEN
        -- the same bytes already there: a resend of an append that did commit
        IF EXISTS (SELECT 1 FROM fd_lines
                    WHERE space = p_space AND run_id = p_run AND relpath = p_relpath
                      AND seq = at_offset AND data = p_data) THEN
            RETURN at_offset;
        END IF;
        RAISE EXCEPTION USING ERRCODE = 'FD002',
            MESSAGE = format('other bytes were already appended at byte %s', at_offset);
    END IF;
    PERFORM fd_change(p_space, p_run, 'line', p_relpath, at_offset);
    RETURN at_offset;
END $$;

CREATE OR REPLACE FUNCTION fd_publish(
    p_space text, p_key text, p_epoch bigint, p_run text, p_relpaths text[], p_datas bytea[]
) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM fd_check_epoch(p_space, p_key, p_epoch, false);
    -- the process publishing a record holds it: live from its first moment
    INSERT INTO fd_runs (space, run_id, key, epoch, live)
    VALUES (p_space, p_run, p_key, p_epoch, true)
    ON CONFLICT (space, run_id) DO UPDATE
        SET key = EXCLUDED.key, epoch = EXCLUDED.epoch, live = true, updated = now();
    FOR i IN 1 .. coalesce(array_length(p_relpaths, 1), 0) LOOP
        PERFORM fd_put_file(p_space, p_run, p_relpaths[i], p_datas[i]);
    END LOOP;
    PERFORM fd_change(p_space, p_run, 'publish', NULL, NULL);
END $$;

CREATE OR REPLACE FUNCTION fd_set_live(
    p_space text, p_key text, p_epoch bigint, p_run text,
    p_worker text, p_host text, p_pid integer
) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM fd_check_epoch(p_space, p_key, p_epoch, true);
    UPDATE fd_keys SET live_run = p_run WHERE space = p_space AND key = p_key;
    INSERT INTO fd_runs (space, run_id, key, epoch, worker, host, pid, live)
    VALUES (p_space, p_run, p_key, p_epoch, p_worker, p_host, p_pid, true)
    ON CONFLICT (space, run_id) DO UPDATE
        SET key = EXCLUDED.key, epoch = EXCLUDED.epoch, worker = EXCLUDED.worker,
            host = EXCLUDED.host, pid = EXCLUDED.pid, live = true, updated = now();
    PERFORM fd_change(p_space, p_run, 'live', NULL, NULL);
END $$;

CREATE OR REPLACE FUNCTION fd_end_live(p_space text, p_key text, p_run text, p_epoch bigint)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE ended text;
BEGIN
    -- the key's process ended (its epoch was checked) or was reaped: whatever run of
    -- it the key names (a `flowdrop-tui run` the flow started, too) is over
    UPDATE fd_keys SET live_run = NULL WHERE space = p_space AND key = p_key;
    -- every run the key's process held (its own, and runs of keys it called)
    FOR ended IN
        UPDATE fd_runs SET live = false, updated = now()
         WHERE space = p_space AND live
           AND (run_id = p_run OR (key = p_key AND (p_epoch IS NULL OR epoch = p_epoch)))
        RETURNING run_id
    LOOP
        PERFORM fd_change(p_space, ended, 'live', NULL, NULL);
    END LOOP;
END $$;

CREATE OR REPLACE FUNCTION fd_clear_live(p_space text, p_key text, p_epoch bigint, p_run text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM fd_check_epoch(p_space, p_key, p_epoch, true);
    PERFORM fd_end_live(p_space, p_key, p_run, p_epoch);
END $$;

CREATE OR REPLACE FUNCTION fd_bump(p_space text, p_key text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE new_epoch bigint; ended text;
BEGIN
    INSERT INTO fd_keys (space, key) VALUES (p_space, p_key) ON CONFLICT DO NOTHING;
    -- FOR UPDATE waits for every write in flight (they hold FOR SHARE)
    SELECT epoch + 1 INTO new_epoch FROM fd_keys WHERE space = p_space AND key = p_key FOR UPDATE;
    -- nothing runs under the new epoch yet: whatever run the key named is fenced out
    UPDATE fd_keys SET epoch = new_epoch, live_run = NULL
     WHERE space = p_space AND key = p_key;
    -- every run held under an older epoch can never write again: it is over and reads
    -- `interrupted` (a process of it still going kills itself at its next write).
    -- Before, a bump alone left it `running` for good (only fd_reap ended it).
    FOR ended IN
        UPDATE fd_runs SET live = false, updated = now()
         WHERE space = p_space AND key = p_key AND live AND epoch < new_epoch
        RETURNING run_id
    LOOP
        PERFORM fd_change(p_space, ended, 'live', NULL, NULL);
    END LOOP;
    RETURN new_epoch;
END $$;

CREATE OR REPLACE FUNCTION fd_claim(p_space text, p_key text, p_worker text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE holder text; new_epoch bigint;
BEGIN
    INSERT INTO fd_keys (space, key) VALUES (p_space, p_key) ON CONFLICT DO NOTHING;
    SELECT live_run INTO holder FROM fd_keys
     WHERE space = p_space AND key = p_key FOR UPDATE;
    IF holder IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'FD003', MESSAGE = holder;
    END IF;
    UPDATE fd_keys SET epoch = epoch + 1, claimed_by = p_worker
     WHERE space = p_space AND key = p_key RETURNING epoch INTO new_epoch;
    RETURN new_epoch;
END $$;

CREATE OR REPLACE FUNCTION fd_reap(p_space text, p_key text, p_run text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE new_epoch bigint;
BEGIN
    new_epoch := fd_bump(p_space, p_key);
    PERFORM fd_end_live(p_space, p_key, p_run, NULL);
    RETURN new_epoch;
END $$;

CREATE OR REPLACE FUNCTION fd_reap_epoch(p_space text, p_key text, p_epoch bigint, p_run text)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE current bigint;
BEGIN
    -- the reaping of one lost holder, the one given ``p_epoch``: a reap that arrives
    -- late (a workflow task a cut-off worker ran once it was back) must not fence
    -- out or end a run of a later claim
    SELECT epoch INTO current FROM fd_keys
     WHERE space = p_space AND key = p_key FOR UPDATE;
    IF current IS DISTINCT FROM p_epoch THEN
        RETURN current;
    END IF;
    UPDATE fd_keys SET epoch = epoch + 1 WHERE space = p_space AND key = p_key;
    PERFORM fd_end_live(p_space, p_key, p_run, p_epoch);
    RETURN current + 1;
END $$;

CREATE OR REPLACE FUNCTION fd_delete_runs(p_space text, p_runs text[]) RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE gone text;
BEGIN
    -- locked first: a run cannot turn live between the check and the delete
    PERFORM 1 FROM fd_runs WHERE space = p_space AND run_id = ANY(p_runs) FOR UPDATE;
    FOR gone IN
        SELECT r FROM unnest(p_runs) AS r
         WHERE NOT EXISTS (SELECT 1 FROM fd_runs
                            WHERE space = p_space AND run_id = r AND live)
           AND (EXISTS (SELECT 1 FROM fd_runs WHERE space = p_space AND run_id = r)
                OR EXISTS (SELECT 1 FROM fd_files WHERE space = p_space AND run_id = r)
                OR EXISTS (SELECT 1 FROM fd_lines WHERE space = p_space AND run_id = r))
    LOOP
        DELETE FROM fd_files WHERE space = p_space AND run_id = gone;
        DELETE FROM fd_lines WHERE space = p_space AND run_id = gone;
        DELETE FROM fd_runs WHERE space = p_space AND run_id = gone;
        -- older changes of the run now point at nothing; the delete supersedes them
        DELETE FROM fd_changes WHERE space = p_space AND run_id = gone;
        PERFORM fd_change(p_space, gone, 'delete', NULL, NULL);
        RETURN NEXT gone;
    END LOOP;
END $$;
"""
