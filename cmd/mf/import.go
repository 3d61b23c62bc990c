package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sync/atomic"
	"time"

	"github.com/mfhq/mf/api"
)

// importMain is `mf import --project ID FILE`: it loads search-console or
// ads-platform rows (docs/imports.md) into a project, through a running
// mf's admin API (--admin-url) or directly on --data / --log and --store.
// Exit status 0 loaded (or nothing to change), 1 refused or failed, 2 usage.
func importMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mf import", flag.ContinueOnError)
	fs.SetOutput(stderr)
	project := fs.String("project", "", "id of the project the rows belong to (required)")
	sf := addStoreFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: mf import --project ID [--data DIR | --log nats://… --store s3://… | --admin-url URL [--admin-token T]] FILE")
		fs.PrintDefaults()
	}
	if code := parseArgs(fs, args, stdout, stderr); code >= 0 {
		return code
	}
	if *project == "" || fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	body, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "mf import: %v\n", err)
		return 1
	}
	if *sf.adminURL != "" {
		return importRemote(ctx, newAdminClient(*sf.adminURL, *sf.adminToken), *project, body, stdout, stderr)
	}
	imp, err := api.ParseImport(bytes.NewReader(body))
	if err != nil {
		fmt.Fprintf(stderr, "mf import: %s: %v\n", fs.Arg(0), err)
		return 1
	}
	o, err := openOffline(ctx, sf, false, newLogger(config{LogLevel: "warn", LogFormat: "text"}, stderr))
	if err != nil {
		fmt.Fprintf(stderr, "mf import: %v\n", err)
		return 1
	}
	defer o.Close()
	imps, err := api.NewImports(api.DefaultImportConfig(), o.bucket, o.cat, nil)
	if err != nil {
		fmt.Fprintf(stderr, "mf import: %v\n", err)
		return 1
	}
	res, err := imps.Apply(ctx, *project, imp)
	if err != nil {
		fmt.Fprintf(stderr, "mf import: %s: %v\n", fs.Arg(0), err)
		return 1
	}
	printImported(stdout, res)
	return 0
}

func printImported(w io.Writer, r api.ImportResult) {
	if !r.Changed {
		fmt.Fprintf(w, "nothing to change: %d rows of %s already stored for project %s\n", r.Rows, r.Source, r.Project)
		return
	}
	fmt.Fprintf(w, "imported %d rows of %s into project %s: %d added, %d replaced, %d unchanged\n",
		r.Rows, r.Source, r.Project, r.Added, r.Replaced, r.Unchanged)
}

// importRemote sends the file to the admin API, showing on stderr how much
// of it was sent (a bar on a terminal, a line every few seconds
// otherwise), then the answer.
func importRemote(ctx context.Context, admin adminClient, project string, body []byte, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	sent := &countingReader{r: bytes.NewReader(body)}
	req, err := admin.request(ctx, http.MethodPost, "/admin/v1/projects/"+url.PathEscape(project)+"/imports", sent)
	if err != nil {
		fmt.Fprintf(stderr, "mf import: %v\n", err)
		return 2
	}
	req.ContentLength = int64(len(body))
	pp := newProgressPrinter(stderr, "import", time.Now)
	pp.noWrites = true
	progress := func() replayProgress {
		phase := "sending"
		if n := sent.n.Load(); n >= int64(len(body)) {
			phase = "loading"
		}
		return replayProgress{Phase: phase, BytesRead: sent.n.Load(), BytesTotal: int64(len(body))}
	}
	stop := make(chan struct{})
	shown := make(chan struct{})
	go func() {
		defer close(shown)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				pp.update(progress())
			}
		}
	}()
	ans, err := admin.send(req)
	close(stop)
	<-shown
	pp.done(progress(), err == nil && ans.Code == http.StatusOK)
	if err != nil && ans.Code == 0 {
		fmt.Fprintf(stderr, "mf import: cannot reach the admin API: %v\n", err)
		return 1
	}
	raw := ans.Body
	if ans.Code != http.StatusOK {
		fmt.Fprintf(stderr, "mf import: %s: %s\n", ans.Status, adminError(raw))
		return 1
	}
	var r api.ImportResult
	if err := json.Unmarshal(raw, &r); err != nil {
		fmt.Fprintf(stderr, "mf import: the admin API answered an unreadable body: %v\n", err)
		return 1
	}
	printImported(stdout, r)
	return 0
}

// countingReader counts the bytes read through it (from another goroutine
// than the one reporting them).
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}
