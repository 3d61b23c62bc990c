package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mfhq/mf/ingest"
	"github.com/mfhq/mf/storage"
	"github.com/mfhq/mf/storage/catalog"
	"github.com/mfhq/mf/storage/eventlog"
)

// provisionMain is `mf provision [flags] FILE`: it applies a provisioning
// file to the catalog, either through a running mf's admin API
// (--admin-url) or directly on the log (--data for the embedded log, or
// --log for an external one). Exit status 0 applied (or nothing to change),
// 1 refused or failed, 2 usage.
func provisionMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mf provision", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", envOr("MF_DATA", "./mf-data"), "directory of the embedded log (env MF_DATA); not while mf serve uses it")
	logURL := fs.String("log", os.Getenv("MF_LOG"), "nats://… of an external log (env MF_LOG)")
	store := fs.String("store", os.Getenv("MF_STORE"), "s3://… of an external object store (env MF_STORE)")
	adminURL := fs.String("admin-url", os.Getenv("MF_ADMIN_URL"), "base URL of a running mf's admin API, e.g. http://127.0.0.1:8082 (env MF_ADMIN_URL)")
	token := fs.String("admin-token", os.Getenv("MF_ADMIN_TOKEN"), "bearer token of the admin API (env MF_ADMIN_TOKEN)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: mf provision [--data DIR | --log nats://… | --admin-url URL [--admin-token T]] FILE")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	body, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "mf provision: %v\n", err)
		return 1
	}
	if *adminURL != "" {
		return provisionRemote(ctx, strings.TrimRight(*adminURL, "/"), *token, body, stdout, stderr)
	}
	logger := newLogger(config{LogLevel: "warn", LogFormat: "text"}, stderr)
	lcfg := eventlog.DefaultConfig()
	lcfg.URL, lcfg.Dir = *logURL, filepath.Join(*data, "log")
	lg, err := eventlog.Open(ctx, lcfg, logger)
	if err != nil {
		fmt.Fprintf(stderr, "mf provision: cannot open the log (if mf serve runs on %s, use --admin-url instead): %v\n", *data, err)
		return 1
	}
	defer lg.Close()
	bcfg := storage.DefaultConfig()
	bcfg.Store, bcfg.Dir = os.Getenv("MF_STORE"), filepath.Join(*data, "objects")
	if *store != "" {
		bcfg.Store = *store
	}
	b, err := storage.Open(ctx, bcfg, logger)
	if err != nil {
		fmt.Fprintf(stderr, "mf provision: cannot open the object store: %v\n", err)
		return 1
	}
	defer b.Close()
	flags, err := ingest.NewFlagDocuments(ctx, ingest.DefaultFlagDocumentsConfig(), b, logger)
	if err != nil {
		fmt.Fprintf(stderr, "mf provision: %v\n", err)
		return 1
	}
	defer flags.Close(context.Background())
	cat, err := openCatalog(ctx, lg, flags.CheckDocuments, logger)
	if err != nil {
		fmt.Fprintf(stderr, "mf provision: %v\n", err)
		return 1
	}
	defer cat.Close()
	res, err := cat.Apply(ctx, body)
	if err != nil {
		fmt.Fprintf(stderr, "mf provision: %s: %v\n", fs.Arg(0), err)
		return 1
	}
	printApplied(stdout, res.Version, res.Changes)
	return 0
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func printApplied(w io.Writer, version uint64, changes []string) {
	if len(changes) == 0 {
		fmt.Fprintf(w, "nothing to change (catalog version %d)\n", version)
		return
	}
	fmt.Fprintf(w, "applied %d changes (catalog version %d):\n", len(changes), version)
	for _, c := range changes {
		fmt.Fprintf(w, "  %s\n", c)
	}
}

func provisionRemote(ctx context.Context, base, token string, body []byte, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, base+"/admin/v1/provision", bytes.NewReader(body))
	if err != nil {
		fmt.Fprintf(stderr, "mf provision: %v\n", err)
		return 2
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "mf provision: cannot reach the admin API: %v\n", err)
		return 1
	}
	defer resp.Body.Close()
	var out struct {
		Version uint64
		Changes []string
		Error   string
		Faults  []catalog.Fault
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		fmt.Fprintf(stderr, "mf provision: the admin API answered %s without a readable body\n", resp.Status)
		return 1
	}
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "mf provision: %s\n", out.Error)
		return 1
	}
	printApplied(stdout, out.Version, out.Changes)
	return 0
}
