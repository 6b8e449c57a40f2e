// The PostgreSQL host store's schema: its tables, its server-side functions and its version.
//
// Owns: the SQL of one realm (one PostgreSQL schema), `SCHEMA_VERSION` and the upgrade from
// version 1, the custom SQLSTATEs the commit function raises, and `quoteIdent`. Guarantees (the argument is in docs/host-store-pg.md):
// - Scope names are `bytea` (their UTF-8 bytes) everywhere: in the primary key, in the listing's
//   partial index, in the ORDER BY and in the page cursor `name > $after`, so every listing is in
//   byte order whatever the database's collation.
// - `commit_one` is the common commit in one statement (its own transaction): the fence table's
//   ROW EXCLUSIVE lock, then one UPDATE checking the token and the version, then the rows; it
//   raises SL004 having written nothing when the UPDATE matched nothing, and commit_batch decides.
// - `commit_batch` runs in the commit's transaction, which the client ends with COMMIT only once
//   the function answered: it takes the fence table's ROW EXCLUSIVE lock (commits never wait on
//   each other for it; an acquire's EXCLUSIVE lock and a load's SHARE lock wait for every commit
//   transaction holding it and hold back the later ones), reads the highest token, then writes
//   each scope in the order the client sorted them (kind, then name bytes), where each UPDATE or
//   INSERT locks only that scope's row. Every refusal raises, so the transaction rolls back
//   whole: a retry of a landed batch (SL000), CONFLICT (SL001), FENCED_OUT (SL002), INVALID (SL003).
// - The loads (`load_head`, `list_heads`, `read_rows`) wait for the commit transactions in flight,
//   so whatever a load answers about a batch, every later load answers too.
// - The rules are those of lib/host/plan.ts, in its order: retry, token, then each update's
//   version, deleted name, truncate below the first row, the row arithmetic of truncate, drop,
//   append, head; a model-based test holds this store to the memory store's answers.
// - The fence token (table `fence`) and the lease (table `lease`, on the server's
//   clock_timestamp()) are rows of their own; the token only grows.

/**
 * The version of the tables and functions below; recorded in `<schema>.seglog_meta`. Version 1
 * had the same tables without `commit_one`; an open of a version-1 realm adds it (`upgradeSql`).
 */
export const SCHEMA_VERSION = 2;

/** SQLSTATEs raised by `commit_batch` (class SL: seglog). */
export const SQLSTATE = {
  landed: 'SL000',
  conflict: 'SL001',
  fencedOut: 'SL002',
  invalid: 'SL003',
  /** `commit_one` matched no scope and wrote nothing: commit_batch decides the answer. */
  missed: 'SL004',
} as const;

/** A PostgreSQL identifier, quoted. */
export function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/** Scope kinds as stored (smallint). */
export const KIND_CODE = { session: 1, identity: 2, mob: 3, record: 4 } as const;

/** Flags of one update in `commit_batch`'s `p_op`. */
export const OP = { delete: 1, head: 2, truncate: 4, drop: 8 } as const;

/** The statements that create one realm's schema (run once, under the creation lock). */
export function createSchemaSql(schema: string): string {
  const s = quoteIdent(schema);
  return `
CREATE SCHEMA IF NOT EXISTS ${s};
CREATE TABLE ${s}.seglog_meta (key text PRIMARY KEY, value bigint NOT NULL);
CREATE TABLE ${s}.fence (id smallint PRIMARY KEY CHECK (id = 1), token bigint NOT NULL CHECK (token >= 0));
CREATE TABLE ${s}.lease (
  id smallint PRIMARY KEY CHECK (id = 1),
  token bigint NOT NULL,
  holder text NOT NULL,
  until timestamptz NOT NULL
);
CREATE TABLE ${s}.scopes (
  kind smallint NOT NULL,
  name bytea NOT NULL,
  version bigint NOT NULL,
  commit_id text NOT NULL,
  head bytea NOT NULL,
  first bigint NOT NULL,
  "end" bigint NOT NULL,
  deleted boolean NOT NULL,
  PRIMARY KEY (kind, name)
) WITH (fillfactor = 80);
ALTER TABLE ${s}.scopes ALTER COLUMN head SET STORAGE EXTERNAL;
CREATE INDEX scopes_visible ON ${s}.scopes (kind, name) WHERE NOT deleted;
CREATE TABLE ${s}.rows (
  kind smallint NOT NULL,
  name bytea NOT NULL,
  idx bigint NOT NULL,
  data bytea NOT NULL,
  PRIMARY KEY (kind, name, idx)
);
ALTER TABLE ${s}.rows ALTER COLUMN data SET STORAGE EXTERNAL;
INSERT INTO ${s}.fence VALUES (1, 0);
INSERT INTO ${s}.lease VALUES (1, 0, '', 'epoch');
${commitFunctionSql(schema)}
${commitOneSql(schema)}
${fenceFunctionsSql(schema)}
${loadFunctionsSql(schema)}
INSERT INTO ${s}.seglog_meta VALUES ('schema_version', ${SCHEMA_VERSION});
`;
}

/**
 * The statements that bring a version-1 realm to this version (run under the creation lock, in
 * one transaction with the version check): version 2 only adds `commit_one`; the tables and the
 * other functions are those of version 1, so every row a version-1 store wrote reads the same.
 */
export function upgradeSql(schema: string, from: number): string {
  if (from !== 1) throw new Error(`no upgrade from schema version ${from}`);
  const s = quoteIdent(schema);
  return `
${commitOneSql(schema)}
UPDATE ${s}.seglog_meta SET value = ${SCHEMA_VERSION} WHERE key = 'schema_version' AND value = 1;
`;
}

/**
 * `commit_one`: the common commit in one call, sent as a statement of its own (the server's
 * implicit transaction: it commits when the procedure returned, or rolls back whole). One update
 * that moves an existing scope from `p_prev` to the next version: the fence table's ROW
 * EXCLUSIVE lock as in commit_batch, then one UPDATE whose WHERE checks the version, the deleted
 * flag, the row arithmetic and the batch's token against the highest one; then the appended rows.
 * `p_head` NULL keeps the head; `p_rows` NULL appends nothing; `p_lens` NULL makes `p_rows` one
 * row, else the rows are `p_rows` cut at those lengths. A procedure, so that its answer is only
 * the statement's completion (no row to describe, send and decode): it returns when the scope
 * moved, and raises SL004 when the UPDATE matched nothing (a conflict, a fence, a retry of a
 * landed batch: nothing was written, and commit_batch decides the answer).
 */
function commitOneSql(schema: string): string {
  const s = quoteIdent(schema);
  return `
CREATE PROCEDURE ${s}.commit_one(
  p_commit text, p_token bigint, p_kind smallint, p_name bytea, p_prev bigint, p_head bytea, p_rows bytea, p_lens int[]
) LANGUAGE plpgsql AS $fn$
DECLARE
  v_n int := CASE WHEN p_rows IS NULL THEN 0 WHEN p_lens IS NULL THEN 1 ELSE cardinality(p_lens) END;
  v_end bigint;
BEGIN
  LOCK TABLE ${s}.fence IN ROW EXCLUSIVE MODE;
  UPDATE ${s}.scopes t SET version = p_prev + 1, commit_id = p_commit, head = COALESCE(p_head, t.head), "end" = t."end" + v_n
    WHERE t.kind = p_kind AND t.name = p_name AND t.version = p_prev AND NOT t.deleted
      AND t."end" + v_n <= 9007199254740991
      AND p_token = (SELECT f.token FROM ${s}.fence f WHERE f.id = 1)
    RETURNING t."end" INTO v_end;
  IF NOT FOUND THEN RAISE EXCEPTION USING ERRCODE = '${SQLSTATE.missed}', MESSAGE = 'moved nothing'; END IF;
  IF v_n = 1 THEN
    INSERT INTO ${s}.rows (kind, name, idx, data) VALUES (p_kind, p_name, v_end - 1, p_rows);
  ELSIF v_n > 1 THEN
    INSERT INTO ${s}.rows (kind, name, idx, data)
      SELECT p_kind, p_name, v_end - v_n + x.k - 1, substring(p_rows FROM (x.at - x.len + 1)::int FOR x.len)
      FROM (SELECT l.len, l.k, sum(l.len) OVER (ORDER BY l.k) AS at FROM unnest(p_lens) WITH ORDINALITY AS l(len, k)) x;
  END IF;
END
$fn$;
`;
}

/**
 * `commit_batch`: one batch, its updates sorted by (kind, name bytes). The blob holds, per update
 * in order, the name, the head (when OP.head) and the rows; the arrays give each piece's 1-based
 * offset and length; `p_order` lists the updates' positions in the batch's own order. Returns 0
 * when applied; every refusal raises (see the module header).
 */
function commitFunctionSql(schema: string): string {
  const s = quoteIdent(schema);
  return `
CREATE FUNCTION ${s}.commit_batch(
  p_commit text, p_token bigint, p_kind smallint[], p_prev bigint[], p_op smallint[],
  p_trunc bigint[], p_drop bigint[], p_name_off int[], p_name_len int[], p_head_off int[], p_head_len int[],
  p_row_first int[], p_row_count int[], p_row_off int[], p_row_len int[], p_order int[], p_blob bytea
) RETURNS smallint LANGUAGE plpgsql AS $fn$
DECLARE
  n int := array_length(p_kind, 1);
  names bytea[] := '{}';
  nexts bigint[] := '{}';
  highest bigint;
  i int;
  k int;
  v_name bytea;
  v_prev bigint;
  v_op smallint;
  v_trunc bigint;
  v_drop bigint;
  v_rows int;
  v_end bigint;
  v_first bigint;
  cur record;
BEGIN
  FOR i IN 1..n LOOP
    names := names || substring(p_blob FROM p_name_off[i] FOR p_name_len[i]);
    nexts := nexts || COALESCE(p_prev[i] + 1, 1);
  END LOOP;
  -- The fence: its table's ROW EXCLUSIVE lock for the whole transaction (commits never wait on
  -- each other for it), then the highest token.
  LOCK TABLE ${s}.fence IN ROW EXCLUSIVE MODE;
  SELECT token INTO highest FROM ${s}.fence WHERE id = 1;
  IF p_token <> highest THEN
    PERFORM 1 FROM ${s}.scopes t, unnest(p_kind, names, nexts) AS b(kind, name, nxt)
      WHERE t.kind = b.kind AND t.name = b.name AND t.version = b.nxt AND t.commit_id = p_commit;
    IF FOUND THEN RAISE EXCEPTION USING ERRCODE = '${SQLSTATE.landed}', MESSAGE = 'landed'; END IF;
    IF p_token < highest THEN RAISE EXCEPTION USING ERRCODE = '${SQLSTATE.fencedOut}', MESSAGE = highest::text; END IF;
    RAISE EXCEPTION USING ERRCODE = '${SQLSTATE.invalid}', MESSAGE = 'never-issued';
  END IF;
  FOR i IN 1..n LOOP
    v_name := names[i];
    v_prev := p_prev[i];
    v_op := p_op[i];
    v_trunc := p_trunc[i];
    v_drop := p_drop[i];
    v_rows := p_row_count[i];
    IF v_prev IS NULL THEN
      INSERT INTO ${s}.scopes VALUES (p_kind[i], v_name, 1, p_commit, substring(p_blob FROM p_head_off[i] FOR p_head_len[i]), 0, v_rows, false)
        ON CONFLICT DO NOTHING;
      v_end := v_rows;
    ELSIF (v_op & ${OP.delete}) <> 0 THEN
      UPDATE ${s}.scopes SET version = v_prev + 1, commit_id = p_commit, head = '\\x'::bytea, first = "end", deleted = true
        WHERE kind = p_kind[i] AND name = v_name AND version = v_prev AND NOT deleted;
    ELSE
      UPDATE ${s}.scopes SET
          version = v_prev + 1,
          commit_id = p_commit,
          head = CASE WHEN (v_op & ${OP.head}) <> 0 THEN substring(p_blob FROM p_head_off[i] FOR p_head_len[i]) ELSE head END,
          first = CASE WHEN v_drop IS NOT NULL AND v_drop > first THEN LEAST(v_drop, LEAST("end", COALESCE(v_trunc, "end"))) ELSE first END,
          "end" = LEAST("end", COALESCE(v_trunc, "end")) + v_rows
        WHERE kind = p_kind[i] AND name = v_name AND version = v_prev AND NOT deleted
          AND (v_trunc IS NULL OR v_trunc >= first)
          AND LEAST("end", COALESCE(v_trunc, "end")) + v_rows <= 9007199254740991
        RETURNING first, "end" INTO v_first, v_end;
    END IF;
    IF NOT FOUND THEN
      -- Refused: say why as lib/host/plan.ts would, a landed batch first, then the first update in
      -- the batch's own order that fails (those locked before this one passed). A landed batch
      -- moved every scope it wrote past its previous, so only the first update can find it (a
      -- later one would see this transaction's own writes).
      IF i = 1 THEN
        PERFORM 1 FROM ${s}.scopes t, unnest(p_kind, names, nexts) AS b(kind, name, nxt)
          WHERE t.kind = b.kind AND t.name = b.name AND t.version = b.nxt AND t.commit_id = p_commit;
        IF FOUND THEN RAISE EXCEPTION USING ERRCODE = '${SQLSTATE.landed}', MESSAGE = 'landed'; END IF;
      END IF;
      FOREACH k IN ARRAY p_order LOOP
        CONTINUE WHEN k < i;
        SELECT version, deleted, first INTO cur FROM ${s}.scopes WHERE kind = p_kind[k] AND name = names[k];
        IF NOT FOUND THEN
          IF p_prev[k] IS NOT NULL THEN RAISE EXCEPTION USING ERRCODE = '${SQLSTATE.conflict}', MESSAGE = (k - 1)::text, DETAIL = ''; END IF;
        ELSIF p_prev[k] IS NULL AND cur.deleted THEN
          RAISE EXCEPTION USING ERRCODE = '${SQLSTATE.invalid}', MESSAGE = 'deleted-name', DETAIL = (k - 1)::text;
        ELSIF cur.deleted THEN
          RAISE EXCEPTION USING ERRCODE = '${SQLSTATE.conflict}', MESSAGE = (k - 1)::text, DETAIL = '';
        ELSIF p_prev[k] IS NULL OR cur.version <> p_prev[k] THEN
          RAISE EXCEPTION USING ERRCODE = '${SQLSTATE.conflict}', MESSAGE = (k - 1)::text, DETAIL = cur.version::text;
        ELSIF p_trunc[k] IS NOT NULL AND p_trunc[k] < cur.first THEN
          RAISE EXCEPTION USING ERRCODE = '${SQLSTATE.invalid}', MESSAGE = 'truncate-below-first', DETAIL = (k - 1)::text || ' ' || cur.first::text;
        ELSIF k = i THEN
          RAISE EXCEPTION USING ERRCODE = '${SQLSTATE.invalid}', MESSAGE = 'overflow', DETAIL = (k - 1)::text;
        END IF;
      END LOOP;
      RAISE EXCEPTION USING ERRCODE = '${SQLSTATE.conflict}', MESSAGE = (i - 1)::text, DETAIL = '';
    END IF;
    -- Rows: the truncated tail and the dropped head go, then the appended rows take [end - count, end).
    IF (v_op & ${OP.delete}) <> 0 THEN
      DELETE FROM ${s}.rows WHERE kind = p_kind[i] AND name = v_name;
    ELSIF v_prev IS NOT NULL THEN
      IF v_trunc IS NOT NULL THEN
        DELETE FROM ${s}.rows WHERE kind = p_kind[i] AND name = v_name AND idx >= v_trunc;
      END IF;
      IF v_drop IS NOT NULL THEN
        DELETE FROM ${s}.rows WHERE kind = p_kind[i] AND name = v_name AND idx < v_first;
      END IF;
    END IF;
    IF v_rows > 0 THEN
      INSERT INTO ${s}.rows (kind, name, idx, data)
        SELECT p_kind[i], v_name, v_end - v_rows + (j - p_row_first[i]), substring(p_blob FROM p_row_off[j] FOR p_row_len[j])
        FROM generate_series(p_row_first[i], p_row_first[i] + v_rows - 1) AS j;
    END IF;
  END LOOP;
  RETURN 0;
END
$fn$;
`;
}

/**
 * `acquire_fence` and `renew_fence`, on the server's clock. An acquire reads the lease first
 * without the fence lock, so that an exclusive acquire that finds a live holder (HELD) never
 * holds back commits; otherwise it takes the fence table's EXCLUSIVE lock (waiting for every
 * commit transaction, which holds ROW EXCLUSIVE, holding back the later ones), raises the token and records the
 * lease. A renew touches only the lease row, so it never waits for commits.
 */
function fenceFunctionsSql(schema: string): string {
  const s = quoteIdent(schema);
  return `
CREATE FUNCTION ${s}.acquire_fence(p_exclusive boolean, p_holder text, p_lease_ms double precision)
RETURNS TABLE (token bigint, superseded_ms double precision, held_holder text, held_ms double precision, held_token bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
  f bigint;
  l record;
  remaining double precision;
BEGIN
  IF p_exclusive THEN
    SELECT x.token AS t, x.holder, x.until INTO l FROM ${s}.lease x WHERE x.id = 1;
    remaining := GREATEST(0, 1000 * extract(epoch FROM (l.until - clock_timestamp())));
    IF l.t > 0 AND remaining > 0 THEN
      RETURN QUERY SELECT NULL::bigint, NULL::double precision, l.holder, remaining, l.t;
      RETURN;
    END IF;
  END IF;
  LOCK TABLE ${s}.fence IN EXCLUSIVE MODE;
  SELECT x.token AS t, x.holder, x.until INTO l FROM ${s}.lease x WHERE x.id = 1 FOR UPDATE;
  SELECT x.token INTO f FROM ${s}.fence x WHERE x.id = 1;
  remaining := CASE WHEN l.t = f AND f > 0 THEN GREATEST(0, 1000 * extract(epoch FROM (l.until - clock_timestamp()))) ELSE 0 END;
  IF p_exclusive AND remaining > 0 THEN
    RETURN QUERY SELECT NULL::bigint, NULL::double precision, l.holder, remaining, l.t;
    RETURN;
  END IF;
  UPDATE ${s}.fence x SET token = x.token + 1 WHERE x.id = 1 RETURNING x.token INTO f;
  UPDATE ${s}.lease x SET token = f, holder = p_holder, until = clock_timestamp() + p_lease_ms * interval '1 millisecond' WHERE x.id = 1;
  RETURN QUERY SELECT f, remaining, NULL::text, NULL::double precision, NULL::bigint;
END
$fn$;

CREATE FUNCTION ${s}.renew_fence(p_token bigint, p_lease_ms double precision) RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
  f bigint;
BEGIN
  UPDATE ${s}.lease x SET until = clock_timestamp() + p_lease_ms * interval '1 millisecond'
    WHERE x.id = 1 AND x.token = p_token AND x.token > 0;
  IF FOUND THEN RETURN 0; END IF;
  SELECT x.token INTO f FROM ${s}.fence x WHERE x.id = 1;
  IF p_token < f THEN RETURN f; END IF;
  RETURN -1;
END
$fn$;
`;
}

/**
 * The loads. Each first takes the fence table's SHARE lock, which waits for every commit
 * transaction in flight (they hold ROW EXCLUSIVE until their COMMIT or their abort) and holds back
 * new ones for the statement's length; it then reads in a snapshot taken after the wait. So a load
 * never answers while a commit it could miss is still open: whatever it answers about a batch is
 * final (a dead writer's transaction can only abort, since only a live client sends COMMIT).
 */
function loadFunctionsSql(schema: string): string {
  const s = quoteIdent(schema);
  return `
CREATE FUNCTION ${s}.load_head(p_kind smallint, p_name bytea)
RETURNS TABLE (version bigint, commit_id text, head bytea) LANGUAGE plpgsql AS $fn$
BEGIN
  LOCK TABLE ${s}.fence IN SHARE MODE;
  RETURN QUERY SELECT t.version, t.commit_id, t.head FROM ${s}.scopes t WHERE t.kind = p_kind AND t.name = p_name AND NOT t.deleted;
END
$fn$;

CREATE FUNCTION ${s}.list_heads(p_kind smallint, p_after bytea, p_limit int)
RETURNS TABLE (name bytea, version bigint, commit_id text, head bytea) LANGUAGE plpgsql AS $fn$
BEGIN
  LOCK TABLE ${s}.fence IN SHARE MODE;
  IF p_after IS NULL THEN
    RETURN QUERY SELECT t.name, t.version, t.commit_id, t.head FROM ${s}.scopes t
      WHERE t.kind = p_kind AND NOT t.deleted ORDER BY t.name LIMIT p_limit;
  ELSE
    RETURN QUERY SELECT t.name, t.version, t.commit_id, t.head FROM ${s}.scopes t
      WHERE t.kind = p_kind AND NOT t.deleted AND t.name > p_after ORDER BY t.name LIMIT p_limit;
  END IF;
END
$fn$;

CREATE FUNCTION ${s}.read_rows(p_kind smallint, p_name bytea, p_from bigint, p_limit bigint)
RETURNS TABLE (first bigint, idx bigint, data bytea) LANGUAGE plpgsql AS $fn$
BEGIN
  LOCK TABLE ${s}.fence IN SHARE MODE;
  RETURN QUERY SELECT t.first, r.idx, r.data FROM ${s}.scopes t LEFT JOIN LATERAL (
      SELECT x.idx, x.data FROM ${s}.rows x
      WHERE x.kind = t.kind AND x.name = t.name AND x.idx >= p_from AND x.idx < t."end" ORDER BY x.idx LIMIT p_limit
    ) r ON true
    WHERE t.kind = p_kind AND t.name = p_name AND NOT t.deleted ORDER BY r.idx;
END
$fn$;
`;
}
