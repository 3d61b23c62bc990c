package ingest

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/mfhq/mf/internal/apptest"
	"github.com/mfhq/mf/storage"
)

// bigProjectFile is a provisioning file with one project of n flags read
// by both the website and servers: splits, every fifth with a property
// condition, every seventh with a payload.
func bigProjectFile(n int) []byte {
	var flags []string
	for i := 0; i < n; i++ {
		rules := `[{"sh":5000,"w":[["a",5000],["b",5000]]}]`
		if i%5 == 0 {
			rules = `[{"if":[["p","plan","is",["pro"]]],"x":"b"},{"w":[["a",5000],["b",5000]]}]`
		}
		payload := ""
		if i%7 == 0 {
			payload = `,"p":{"b":{"n":` + fmt.Sprint(i) + `}}`
		}
		flags = append(flags, fmt.Sprintf(`{"key":"flag-%04d","readBy":"both","t":"m","u":"b","d":"a","s":"seed%08d"%s,"r":%s}`, i, i, payload, rules))
	}
	return []byte(`{"organizations":[{"id":"b1000000-0000-4000-8000-000000000001","slug":"bench","name":"Bench","plan":"pro",
	  "projects":[{"id":"b2000000-0000-4000-8000-000000000001","slug":"bench","name":"Bench","timezone":"UTC","reportingCurrency":"USD",
	    "flags":[` + strings.Join(flags, ",") + `]}]}]}`)
}

// benchStack opens the real parts in dir (apptest) and applies file.
func benchStack(b *testing.B, dir string, file []byte) *apptest.Stack {
	b.Helper()
	st := apptest.Start(b, apptest.Options{Dir: dir})
	st.Apply(b, "the benchmark project", file)
	return st
}

// Recompiling a project of 500 flags: the browser, values (through the
// WebAssembly evaluator) and server documents. Sub-benchmarks: with the
// gzip copies (the default, GzipMinBytes 1024), without them, and with
// the compile times recorded in a local object store.
func BenchmarkCompileProject500Flags(b *testing.B) {
	dir := b.TempDir()
	stack := benchStack(b, dir, bigProjectFile(500))
	st := stack.Catalog.State()
	const project = "b2000000-0000-4000-8000-000000000001"
	pf := st.CompiledFlags(project)
	if len(pf.Browser) != 500 || len(pf.Server) != 500 {
		b.Fatalf("%d browser and %d server flags", len(pf.Browser), len(pf.Server))
	}
	bucket := stack.Bucket
	for _, bc := range []struct {
		name   string
		gzip   int
		bucket storage.Bucket
	}{{"gzip", 1024, nil}, {"nogzip", -1, nil}, {"gzip+stamps", 1024, bucket}} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := DefaultFlagDocumentsConfig()
			cfg.GzipMinBytes = bc.gzip
			cfg.Engine.Logger = slog.New(slog.DiscardHandler)
			d, err := NewFlagDocuments(context.Background(), cfg, bc.bucket, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close(context.Background())
			ctx := context.Background()
			pd, err := d.compileProject(ctx, st, project, pf, nil, 1)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(pd.browser.body) + len(pd.values.body) + len(pd.server.body)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				// A new at each time: the content is new to the stamps too.
				if _, err := d.compileProject(ctx, st, project, pf, nil, int64(i+2)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(pd.browser.body)), "browser-bytes")
			b.ReportMetric(float64(len(pd.server.body)), "server-bytes")
		})
	}
}
