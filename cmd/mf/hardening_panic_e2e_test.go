package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// The fault build: mf built with the tag mffaults (faults_on.go), where a
// request with the header X-Mf-Test-Panic panics in its handlers. For
// the tests only; TestMain starts building it in the background when the
// run includes a test that needs it, so that its time is not the test's.
var (
	faultBinary   string
	faultBuildErr error
	faultBuildOut []byte
	faultBuilt    = make(chan struct{})
)

// faultTests are the tests that use the fault build.
var faultTests = []string{"TestPanicInAHandlerAnswers500AndLives", "TestErasureCrash", "TestRetentionDeletes"}

// startFaultBuild starts the fault build into dir when the -test.run
// pattern selects a test of faultTests, and returns what stops it.
func startFaultBuild(dir string) (stop func()) {
	flag.Parse()
	pattern := ""
	if f := flag.Lookup("test.run"); f != nil {
		pattern = f.Value.String()
	}
	re, err := regexp.Compile(pattern)
	wanted := err != nil || pattern == "" || slices.ContainsFunc(faultTests, re.MatchString)
	if !wanted {
		close(faultBuilt)
		faultBuildErr = errors.New("not built: the -run pattern selected no test that needs it")
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	faultBinary = filepath.Join(dir, "mf-faults")
	go func() {
		defer close(faultBuilt)
		cmd := exec.CommandContext(ctx, "go", "build", "-tags", "mffaults", "-o", faultBinary, ".")
		faultBuildOut, faultBuildErr = cmd.CombinedOutput()
	}()
	return func() { cancel(); <-faultBuilt }
}

// faultBuild waits for the fault build and returns its path.
func faultBuild(t *testing.T) string {
	t.Helper()
	<-faultBuilt
	if faultBuildErr != nil {
		t.Fatalf("cannot build mf with -tags mffaults: %v\n%s", faultBuildErr, faultBuildOut)
	}
	return faultBinary
}

type panicCase struct {
	Name, Listener, Method, Path, Panic, Auth, Body string
	Status                                          int
}

// TestPanicInAHandlerAnswers500AndLives: a panic in the handlers of any
// listener (testdata/hardening/panics.json) answers that request 500 in
// the listener's own error shape, is logged with its stack but without
// the panic's value (which may carry request data), is counted in
// mf_http_panics_total, and the process goes on: the same requests
// without the fault are answered, and it exits 0 on SIGTERM.
func TestPanicInAHandlerAnswers500AndLives(t *testing.T) {
	bin := faultBuild(t)
	raw, err := os.ReadFile("testdata/hardening/panics.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []panicCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	p := startMFBin(t, bin, nil, t.TempDir(), "serve", "--provision", demoFile)
	base := map[string]string{"ingest": p.ingest, "api": p.api, "admin": p.admin}
	want := map[string]float64{}
	for _, c := range cases {
		h := []string{"X-Mf-Test-Panic", c.Panic, "Origin", "https://shop.example", "User-Agent", browserUA}
		if c.Auth == "pat" {
			h = append(h, "Authorization", "Bearer "+demoPAT)
		}
		var body []byte
		if c.Method == "POST" {
			body = batchBody("a1a1a1a1-0000-4000-8000-000000000001", "full",
				`{"name":"$pageview","anonymousId":"p-1","page":{"url":"https://shop.example/"}}`)
		}
		code, _, b := do(t, c.Method, base[c.Listener]+c.Path, body, h...)
		if code != c.Status || !strings.Contains(string(b), c.Body) {
			t.Errorf("%s: %d %s, want %d with %s", c.Name, code, b, c.Status, c.Body)
		}
		want[c.Listener]++
		// The same request without the fault is answered as usual.
		code, _, b = do(t, c.Method, base[c.Listener]+c.Path, body, h[2:]...)
		if code >= 500 {
			t.Errorf("%s without the fault: %d %s", c.Name, code, b)
		}
	}
	fams := scrape(t, p)
	for l, n := range want {
		if got := sample(t, fams, "mf_http_panics_total", "listener", l); got != n {
			t.Errorf("mf_http_panics_total{listener=%q} = %v, want %v", l, got, n)
		}
	}
	out := p.out.String()
	if n := strings.Count(out, "panic in a request handler"); n != len(cases) {
		t.Errorf("%d panics logged, want %d", n, len(cases))
	}
	for _, w := range []string{"injectPanic", "assignment to entry in nil map", "a value of type string", "route=/v1/batch/:key"} {
		if !strings.Contains(out, w) {
			t.Errorf("the log lacks %q (the stack, the runtime error, the value's type, the route)", w)
		}
	}
	for _, secret := range []string{"mf_secret_in_panic_XYZ123", demoPAT} {
		if strings.Contains(out, secret) {
			t.Errorf("the log holds %q", secret)
		}
	}
	if c := p.stop(time.Minute); c != 0 {
		t.Errorf("mf serve: exit %d on SIGTERM after the panics", c)
	}
}
