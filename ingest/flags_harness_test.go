package ingest_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/mfhq/mf/ingest/internal/flagstack"
	"github.com/mfhq/mf/storage/catalog"
)

// The flag tests run the real stack (flagstack: embedded log on
// t.TempDir(), real catalog, local object store, the WebAssembly
// evaluator) and talk HTTP to it.

// flagsAt is the compile time of the documents of the flag tests,
// 2026-01-01T00:00:00Z: the golden documents carry it as `at`.
const flagsAt = 1767225600000

// flagsWait is the generous deadline of anything that crosses the log.
const flagsWait = 30 * time.Second

// flagsDir is the flag tests' testdata directory.
var flagsDir = filepath.Join("testdata", "flags")

var (
	compileCacheOnce sync.Once
	compileCache     wazero.CompilationCache
)

// sharedCompileCache compiles the evaluator module once for every stack
// of the test binary.
func sharedCompileCache() wazero.CompilationCache {
	compileCacheOnce.Do(func() { compileCache = wazero.NewCompilationCache() })
	return compileCache
}

func fixedClock(ms int64) func() time.Time {
	return func() time.Time { return time.UnixMilli(ms) }
}

// startStack starts a stack on t.TempDir() (unless opts.Shared is set),
// closed when the test ends. Logs at Warn and above go to the test log.
func startStack(t testing.TB, opts flagstack.Options) *flagstack.Stack {
	t.Helper()
	if opts.Shared == nil && opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	opts.CompilationCache = sharedCompileCache()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(testLogWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := flagstack.Start(ctx, opts)
	if err != nil {
		t.Fatalf("cannot start the stack: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("cannot close the stack: %v", err)
		}
	})
	return s
}

type testLogWriter struct{ t testing.TB }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func readFlagsFile(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(flagsDir, name))
	if err != nil {
		t.Fatalf("cannot read test data: %v", err)
	}
	return data
}

// provision applies a provisioning file through the stack's catalog.
func provision(t testing.TB, s *flagstack.Stack, file []byte) *catalog.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), flagsWait)
	defer cancel()
	res, err := s.Catalog.Apply(ctx, file)
	if err != nil {
		t.Fatalf("cannot apply the provisioning file: %v", err)
	}
	return res
}

// httpClient sends exactly the headers a test gives: no transparent gzip.
var httpClient = &http.Client{
	Timeout:   flagsWait,
	Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 16},
}

// answer is a response read whole.
type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) code() string {
	var p struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(a.body, &p)
	return p.Code
}

// do sends one request to the stack.
func do(t testing.TB, s *flagstack.Stack, method, path string, header map[string]string, body []byte) answer {
	t.Helper()
	var r io.Reader
	if body != nil {
		r = strings.NewReader(string(body))
	}
	req, err := http.NewRequest(method, s.URL+path, r)
	if err != nil {
		t.Fatalf("cannot build a request: %v", err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: cannot read the body: %v", method, path, err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: data}
}

// waitUntil polls cond until it holds, failing after flagsWait.
func waitUntil(t testing.TB, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(flagsWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, flagsWait)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return time.Since(start)
}

// Keys of provision.json.
const (
	keyShopWeb         = "mf_shopweb1_Website-Key_1"
	keyShopConsentless = "mf_shopweb2_Consentless-Key_1"
	keyShopServer      = "mf_shopsrv1_Server-Secret-Key_0123456789abcdefghij"
	keyBlogWeb         = "mf_blogweb1_Blog-Key_1"
	keyBlogServer      = "mf_blogsrv1_Blog-Secret-Key_0123456789abcdefghij"
	projectShop        = "f2000000-0000-4000-8000-000000000001"
	projectBlog        = "f2000000-0000-4000-8000-000000000002"
)
