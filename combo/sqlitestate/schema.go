package sqlitestate

import (
	"context"
	"database/sql"
	"fmt"
)

// migrations are the schema steps, in order; migration i brings the file
// from version i to i+1 (PRAGMA user_version). Append, never edit: a file
// records how far it got.
//
// Times are integer Unix nanoseconds, 0 for "none". The efficiency tables
// keep one row per key with expires_at, the instant from which the row
// carries nothing worth restoring (a maximal value for what only an
// explicit reset lifts), so that restore and sweep need one comparison.
var migrations = []string{
	// 1: leases, owner generations, store clock; efficiency tables.
	`
CREATE TABLE meta (
	name  TEXT PRIMARY KEY,
	value INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO meta(name, value) VALUES ('clock', 0), ('generation_floor', 0);

CREATE TABLE leases (
	id            INTEGER PRIMARY KEY AUTOINCREMENT,
	owner_hash    TEXT    NOT NULL CHECK (length(owner_hash) = 64 AND owner_hash NOT GLOB '*[^0-9a-f]*'),
	api_key_id    TEXT    NOT NULL,
	provider      TEXT    NOT NULL,
	connection_id TEXT    NOT NULL,
	generation    INTEGER NOT NULL CHECK (generation > 0 AND generation <= 9007199254740991),
	state         TEXT    NOT NULL CHECK (state IN ('ACTIVE', 'RELEASED', 'EXPIRED', 'INVALIDATED')),
	acquired_at   INTEGER NOT NULL,
	renewed_at    INTEGER NOT NULL,
	expires_at    INTEGER NOT NULL,
	ended_at      INTEGER NOT NULL DEFAULT 0,
	end_reason    TEXT    NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX leases_active_owner ON leases(owner_hash) WHERE state = 'ACTIVE';
CREATE UNIQUE INDEX leases_active_connection ON leases(connection_id) WHERE state = 'ACTIVE';
CREATE INDEX leases_history ON leases(owner_hash, generation, id);
CREATE INDEX leases_expiry ON leases(state, expires_at);
CREATE INDEX leases_ended ON leases(ended_at) WHERE state <> 'ACTIVE';

CREATE TABLE lease_generations (
	owner_hash     TEXT    PRIMARY KEY CHECK (length(owner_hash) = 64),
	max_generation INTEGER NOT NULL CHECK (max_generation > 0),
	touched_at     INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX lease_generations_touched ON lease_generations(touched_at);

CREATE TABLE cooldowns (
	connection_id TEXT    PRIMARY KEY,
	state         TEXT    NOT NULL,
	until_at      INTEGER NOT NULL,
	expires_at    INTEGER NOT NULL,
	entry         TEXT    NOT NULL
) WITHOUT ROWID;
CREATE INDEX cooldowns_expiry ON cooldowns(expires_at);

CREATE TABLE pins (
	provider      TEXT    NOT NULL,
	session       BLOB    NOT NULL CHECK (length(session) = 32),
	connection_id TEXT    NOT NULL,
	created_at    INTEGER NOT NULL,
	last_used_at  INTEGER NOT NULL,
	expires_at    INTEGER NOT NULL,
	PRIMARY KEY (provider, session)
) WITHOUT ROWID;
CREATE INDEX pins_expiry ON pins(expires_at);

CREATE TABLE breakers (
	provider   TEXT    PRIMARY KEY,
	state      TEXT    NOT NULL,
	expires_at INTEGER NOT NULL,
	record     TEXT    NOT NULL
) WITHOUT ROWID;
CREATE INDEX breakers_expiry ON breakers(expires_at);

CREATE TABLE lockouts (
	lockout_key TEXT    PRIMARY KEY,
	until_at    INTEGER NOT NULL,
	expires_at  INTEGER NOT NULL,
	record      TEXT    NOT NULL
) WITHOUT ROWID;
CREATE INDEX lockouts_expiry ON lockouts(expires_at);
`,
	// 2: the window gate's entries.
	`
CREATE TABLE gate_entries (
	entry_key  TEXT    PRIMARY KEY,
	expires_at INTEGER NOT NULL,
	record     TEXT    NOT NULL
) WITHOUT ROWID;
CREATE INDEX gate_entries_expiry ON gate_entries(expires_at);
`,
}

// SchemaVersion is the schema version this package writes (PRAGMA
// user_version of the file).
const SchemaVersion = 2

// migrate brings the file to SchemaVersion in one transaction.
func migrate(ctx context.Context, db *sql.DB, path string) error {
	if len(migrations) != SchemaVersion {
		panic("sqlitestate: SchemaVersion does not match the migrations")
	}
	tx, err := db.BeginTx(ctx, nil) // BEGIN IMMEDIATE (_txlock)
	if err != nil {
		return fmt.Errorf("sqlitestate: open %s: %w: %w", path, ErrUnreadable, err)
	}
	defer tx.Rollback()
	var v int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return fmt.Errorf("sqlitestate: open %s: %w: %w", path, ErrUnreadable, err)
	}
	if v > len(migrations) {
		return fmt.Errorf("sqlitestate: open %s: %w: version %d, this build knows %d", path, ErrNewerSchema, v, len(migrations))
	}
	if v < 0 {
		return fmt.Errorf("sqlitestate: open %s: %w: schema version %d", path, ErrUnreadable, v)
	}
	if v == 0 {
		// A file at version 0 must be empty: a foreign database is not
		// taken over.
		var n int
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(&n); err != nil {
			return fmt.Errorf("sqlitestate: open %s: %w: %w", path, ErrUnreadable, err)
		}
		if n != 0 {
			return fmt.Errorf("sqlitestate: open %s: %w: a database of another program (%d schema objects, no routeguard schema version)", path, ErrUnreadable, n)
		}
	}
	if v == len(migrations) {
		return nil
	}
	for i := v; i < len(migrations); i++ {
		if _, err := tx.ExecContext(ctx, migrations[i]); err != nil {
			return fmt.Errorf("sqlitestate: migrate %s to version %d: %w", path, i+1, err)
		}
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", len(migrations))); err != nil {
		return fmt.Errorf("sqlitestate: migrate %s: %w", path, err)
	}
	return tx.Commit()
}
