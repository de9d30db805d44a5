package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"time"

	"github.com/agentwire/agentwire/internal/store/internal/migrate"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrateSchema brings the database to the newest schema in one immediate
// transaction, so a crash leaves either the old schema or the new one and a
// second process opening the same file waits instead of racing.
func migrateSchema(ctx context.Context, db *sql.DB) (version int, err error) {
	ms, err := migrate.Load(migrationFiles, "migrations")
	if err != nil {
		return 0, err
	}
	tx, err := db.BeginTx(ctx, nil) // BEGIN IMMEDIATE (see dsn)
	if err != nil {
		return 0, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER NOT NULL PRIMARY KEY,
		name    TEXT    NOT NULL,
		applied INTEGER NOT NULL
	) STRICT`); err != nil {
		return 0, fmt.Errorf("create schema_migrations: %w", err)
	}
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&version); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	if n := len(ms); n > 0 && version > ms[n-1].Version {
		return 0, fmt.Errorf("database schema version %d is newer than this program's %d", version, ms[n-1].Version)
	}
	for _, m := range ms {
		if m.Version <= version {
			continue
		}
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return 0, fmt.Errorf("migration %s: %w", m.Name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied) VALUES (?, ?, ?)`,
			m.Version, m.Name, time.Now().UnixMicro()); err != nil {
			return 0, fmt.Errorf("record migration %s: %w", m.Name, err)
		}
		version = m.Version
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("commit migrations: %w", err)
	}
	return version, nil
}
