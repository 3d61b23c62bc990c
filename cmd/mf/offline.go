package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/mfhq/mf/ingest"
	"github.com/mfhq/mf/storage"
	"github.com/mfhq/mf/storage/catalog"
	"github.com/mfhq/mf/storage/eventlog"
)

// storeFlags are the flags of the commands that work either through a
// running mf's admin API or directly on the log and object store
// (provision, replay, import).
type storeFlags struct {
	data, log, store, adminURL, adminToken *string
}

func addStoreFlags(fs *flag.FlagSet) storeFlags {
	return storeFlags{
		data:       fs.String("data", envOr("MF_DATA", "./mf-data"), "directory of the embedded log and store (env MF_DATA); not while mf serve uses it"),
		log:        fs.String("log", os.Getenv("MF_LOG"), "nats://… of an external log (env MF_LOG)"),
		store:      fs.String("store", os.Getenv("MF_STORE"), "s3://… of an external object store (env MF_STORE)"),
		adminURL:   fs.String("admin-url", os.Getenv("MF_ADMIN_URL"), "base URL of a running mf's admin API, e.g. http://127.0.0.1:8082 (env MF_ADMIN_URL)"),
		adminToken: fs.String("admin-token", os.Getenv("MF_ADMIN_TOKEN"), "bearer token of the admin API (env MF_ADMIN_TOKEN)"),
	}
}

// offline is the object store, log and catalog of a command run without
// mf serve. Close it when done.
type offline struct {
	logger *slog.Logger
	bucket storage.Bucket
	log    *eventlog.Log
	flags  *ingest.FlagDocuments // with checkFlags only
	cat    *catalog.Catalog
}

// openOffline opens the stores the flags name. With checkFlags, the
// catalog refuses changes whose flag documents break a rule, as mf serve's
// does. Errors say what could not be opened.
func openOffline(ctx context.Context, f storeFlags, checkFlags bool, logger *slog.Logger) (*offline, error) {
	o := &offline{logger: logger}
	bcfg := storage.DefaultConfig()
	bcfg.Store, bcfg.Dir = *f.store, filepath.Join(*f.data, "objects")
	b, err := storage.Open(ctx, bcfg, logger)
	if err != nil {
		return nil, fmt.Errorf("cannot open the object store: %w", err)
	}
	o.bucket = b
	lcfg := eventlog.DefaultConfig()
	lcfg.URL, lcfg.Dir = *f.log, filepath.Join(*f.data, "log")
	if o.log, err = eventlog.Open(ctx, lcfg, logger); err != nil {
		o.Close()
		return nil, fmt.Errorf("cannot open the log (if mf serve runs on %s, use --admin-url instead): %w", *f.data, err)
	}
	var check func(*catalog.State) error
	if checkFlags {
		if o.flags, err = ingest.NewFlagDocuments(ctx, ingest.DefaultFlagDocumentsConfig(), b, logger); err != nil {
			o.Close()
			return nil, err
		}
		check = o.flags.CheckDocuments
	}
	if o.cat, err = openCatalog(ctx, o.log, check, logger); err != nil {
		o.Close()
		return nil, err
	}
	return o, nil
}

// Close closes what openOffline opened, in reverse order.
func (o *offline) Close() error {
	var errs []error
	if o.cat != nil {
		errs = append(errs, o.cat.Close())
	}
	if o.flags != nil {
		errs = append(errs, o.flags.Close(context.Background()))
	}
	if o.log != nil {
		errs = append(errs, o.log.Close())
	}
	if o.bucket != nil {
		errs = append(errs, o.bucket.Close())
	}
	return errors.Join(errs...)
}
