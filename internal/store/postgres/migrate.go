package postgres

import (
	"context"
	"embed"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentwire/agentwire/internal/store/internal/migrate"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrateSchema brings the schema to the newest version in one transaction
// under an advisory lock, so several servers starting at once apply each
// migration exactly once and a crash leaves the old schema or the new one.
//
// upTo, when positive, stops at that version (tests build old schemas with
// it).
func migrateSchema(ctx context.Context, pool *pgxpool.Pool, schema string, upTo int) (version int, err error) {
	ms, err := migrate.Load(migrationFiles, "migrations")
	if err != nil {
		return 0, err
	}
	if upTo > 0 {
		ms = slices.DeleteFunc(ms, func(m migrate.Migration) bool { return m.Version > upTo })
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('agentwire/store/migrate/' || $1, 0))`, schema); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		if schema != "" {
			if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{schema}.Sanitize()); err != nil {
				return fmt.Errorf("create schema: %w", err)
			}
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version integer     PRIMARY KEY,
			name    text        NOT NULL,
			applied timestamptz NOT NULL DEFAULT now()
		)`); err != nil {
			return fmt.Errorf("create schema_migrations: %w", err)
		}
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&version); err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		if n := len(ms); n > 0 && version > ms[n-1].Version {
			return fmt.Errorf("database schema version %d is newer than this program's %d", version, ms[n-1].Version)
		}
		for _, m := range ms {
			if m.Version <= version {
				continue
			}
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("migration %s: %w", m.Name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
				return fmt.Errorf("record migration %s: %w", m.Name, err)
			}
			version = m.Version
		}
		return nil
	})
	return version, err
}
