package storage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
)

// Config chooses and configures the object store backend.
type Config struct {
	// Store is the URL of an S3 store (MinIO or any S3 that supports
	// conditional writes): s3://ACCESS:SECRET@host:port/bucket with the
	// optional parameters secure=false (plain HTTP; the default is HTTPS)
	// and region=R. Percent-encode special characters of the keys; without
	// both keys they are found as AWS and MinIO clients find them
	// (chainCredentials). The bucket is created if missing. Empty: the
	// local directory Dir.
	// (--store, MF_STORE)
	Store string
	// Dir is the directory of the local backend, used when Store is empty;
	// created if missing. mf puts it under --data.
	Dir string
}

// DefaultConfig is the embedded default: a local directory under the
// default --data directory.
func DefaultConfig() Config {
	return Config{Dir: "mf-data/objects"}
}

// Validate reports what in c is unusable, and how to fix it. It never
// repeats the secret key of Store.
func (c Config) Validate() error {
	if c.Store != "" {
		if _, err := parseS3URL(c.Store); err != nil {
			return fmt.Errorf("invalid object store config: %w", err)
		}
		return nil
	}
	if c.Dir == "" {
		return errors.New("invalid object store config: neither an S3 URL (--store) nor a local directory is set; set one")
	}
	return nil
}

// Open opens the object store that cfg names: the S3 store of cfg.Store
// (creating its bucket if missing) or else the local directory cfg.Dir
// (creating it if missing).
func Open(ctx context.Context, cfg Config, logger *slog.Logger) (Bucket, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Store != "" {
		loc, err := parseS3URL(cfg.Store)
		if err != nil {
			return nil, err
		}
		return openS3(ctx, loc, logger)
	}
	return openLocal(cfg.Dir, logger)
}
