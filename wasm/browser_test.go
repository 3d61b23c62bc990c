//go:build unix

package wasm

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestChromiumCorpus runs the corpus through wasm/js/evaluator.mjs in
// headless Chromium: the test serves a page, the module (negotiated as the
// ingest service serves it) and the corpus on 127.0.0.1, and the page posts
// its results back.
func TestChromiumCorpus(t *testing.T) {
	t.Parallel()
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is needed for the browser test: apt-get update && apt-get install -y chromium")
	}
	page, err := os.ReadFile("testdata/corpus.html")
	if err != nil {
		t.Fatal(err)
	}
	corpus, err := os.ReadFile(corpusPath)
	if err != nil {
		t.Fatalf("cannot read the corpus: %v", err)
	}
	mod := Module()

	type report struct {
		UserAgent string     `json:"userAgent"`
		Error     string     `json:"error"`
		Results   []jsResult `json:"results"`
		Recovery  string     `json:"recovery"`
	}
	reports := make(chan report, 1)
	var mu sync.Mutex
	var encodings []string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(page)
	})
	mux.HandleFunc("GET /js/{file}", func(w http.ResponseWriter, r *http.Request) {
		b, err := os.ReadFile(filepath.Join("js", filepath.Base(r.PathValue("file"))))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		w.Write(b)
	})
	mux.HandleFunc("GET /evaluator.wasm", func(w http.ResponseWriter, r *http.Request) {
		body, enc := mod.Negotiate(r.Header.Get("Accept-Encoding"))
		mu.Lock()
		encodings = append(encodings, enc)
		mu.Unlock()
		w.Header().Set("Content-Type", mod.ContentType)
		w.Header().Set("Vary", "Accept-Encoding")
		if enc != "" {
			w.Header().Set("Content-Encoding", enc)
		}
		w.Write(body)
	})
	mux.HandleFunc("GET /corpus.jsonl", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write(corpus)
	})
	mux.HandleFunc("POST /results", func(w http.ResponseWriter, r *http.Request) {
		var rep report
		b, err := io.ReadAll(r.Body)
		if err == nil {
			err = json.Unmarshal(b, &rep)
		}
		if err != nil {
			rep.Error = "cannot read the posted results: " + err.Error()
		}
		select {
		case reports <- rep:
		default:
		}
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("cannot listen: %v", err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(l)
	defer srv.Close()

	profile := t.TempDir()
	var out bytes.Buffer
	cmd := exec.Command(chromium, "--headless", "--no-sandbox", "--disable-gpu",
		"--disable-quic", "--no-first-run", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--user-data-dir="+profile, "http://"+l.Addr().String()+"/")
	cmd.Stdout, cmd.Stderr = &out, &out
	// Its own process group, so that ending it ends its helpers too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("cannot start chromium: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}()

	var rep report
	select {
	case rep = <-reports:
	case err := <-exited:
		exited <- err
		t.Fatalf("chromium exited (%v) before the page reported; output:\n%s", err, out.Bytes())
	case <-time.After(5 * time.Minute):
		t.Fatalf("the page did not report within 5 minutes; chromium output:\n%s", out.Bytes())
	}
	if rep.Error != "" {
		t.Fatalf("the page failed: %s", rep.Error)
	}
	mu.Lock()
	t.Logf("%s; module fetched with encodings %q", rep.UserAgent, encodings)
	mu.Unlock()
	if rep.Recovery != "ok" {
		t.Errorf("chromium: the evaluator does not recover from a trap: %q", rep.Recovery)
	}
	checkJSResults(t, "chromium", loadCorpus(t), rep.Results)
}
