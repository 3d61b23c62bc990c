package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mfhq/mf/internal/apptest"
	"github.com/mfhq/mf/storage"
	"github.com/mfhq/mf/storage/catalog"
)

// The handler tests run the real reporting API on the parts of an
// apptest.Stack: the real embedded log, the real catalog (provisioned from
// testdata/catalog.json) and a local-directory bucket.

// testNow is the clock of the handler tests unless a test moves it.
var testNow = time.Date(2026, 6, 15, 12, 0, 0, 0, time.UTC)

type testEnv struct {
	rep    *Reporting
	cat    *catalog.Catalog
	bucket storage.Bucket
	clock  atomic.Int64 // unix nanos
}

func (e *testEnv) now() time.Time { return time.Unix(0, e.clock.Load()).UTC() }

func newTestEnv(t testing.TB, cfg ReportingConfig) *testEnv {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := apptest.Start(t, apptest.Options{Provision: []string{"testdata/catalog.json"}})
	cat, b, logger := st.Catalog, st.Bucket, st.Logger
	env := &testEnv{cat: cat, bucket: b}
	env.clock.Store(testNow.UnixNano())
	rep, err := NewReporting(ctx, cfg, ReportingDeps{Catalog: cat, Bucket: b, Clock: env.now}, func() bool { return true }, logger)
	if err != nil {
		t.Fatalf("cannot build the reporting API: %v", err)
	}
	t.Cleanup(func() { rep.Close() })
	env.rep = rep
	return env
}

// send runs one request through the app from addr (empty: 192.0.2.1).
func (e *testEnv) send(t testing.TB, method, path, auth, addr string) (int, http.Header, []byte) {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	if addr == "" {
		addr = "192.0.2.1"
	}
	if strings.Contains(addr, ":") {
		req.RemoteAddr = "[" + addr + "]:4000"
	} else {
		req.RemoteAddr = addr + ":4000"
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := e.rep.App().Test(req, -1)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, body
}

// lookup follows a dotted path (object keys and list indexes) in a decoded
// JSON document.
func lookup(doc any, path string) (any, bool) {
	cur := doc
	for _, seg := range strings.Split(path, ".") {
		switch v := cur.(type) {
		case map[string]any:
			n, ok := v[seg]
			if !ok {
				return nil, false
			}
			cur = n
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(v) {
				return nil, false
			}
			cur = v[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

func decode(t testing.TB, body []byte) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("answer is not JSON: %v: %s", err, body)
	}
	return doc
}
