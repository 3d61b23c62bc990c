package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/mfhq/mf/storage/catalog"
)

// provisionMain is `mf provision [flags] FILE`: it applies a provisioning
// file to the catalog, either through a running mf's admin API
// (--admin-url) or directly on the log (--data for the embedded log, or
// --log for an external one). Exit status 0 applied (or nothing to change),
// 1 refused or failed, 2 usage.
func provisionMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mf provision", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sf := addStoreFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: mf provision [--data DIR | --log nats://… | --admin-url URL [--admin-token T]] FILE")
		fs.PrintDefaults()
	}
	if code := parseArgs(fs, args, stdout, stderr); code >= 0 {
		return code
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
	if *sf.adminURL != "" {
		return provisionRemote(ctx, newAdminClient(*sf.adminURL, *sf.adminToken), body, stdout, stderr)
	}
	o, err := openOffline(ctx, sf, true, newLogger(config{LogLevel: "warn", LogFormat: "text"}, stderr))
	if err != nil {
		fmt.Fprintf(stderr, "mf provision: %v\n", err)
		return 1
	}
	defer o.Close()
	res, err := o.cat.Apply(ctx, body)
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

func provisionRemote(ctx context.Context, admin adminClient, body []byte, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	req, err := admin.request(ctx, http.MethodPut, "/admin/v1/provision", bytes.NewReader(body))
	if err != nil {
		fmt.Fprintf(stderr, "mf provision: %v\n", err)
		return 2
	}
	req.Header.Set("Content-Type", "application/json")
	ans, err := admin.send(req)
	if err != nil && ans.Code == 0 {
		fmt.Fprintf(stderr, "mf provision: cannot reach the admin API: %v\n", err)
		return 1
	}
	var out struct {
		Version uint64
		Changes []string
		Error   string
		Faults  []catalog.Fault
	}
	if err := json.Unmarshal(ans.Body, &out); err != nil {
		fmt.Fprintf(stderr, "mf provision: the admin API answered %s without a readable body\n", ans.Status)
		return 1
	}
	if ans.Code != http.StatusOK {
		fmt.Fprintf(stderr, "mf provision: %s\n", out.Error)
		return 1
	}
	printApplied(stdout, out.Version, out.Changes)
	return 0
}
