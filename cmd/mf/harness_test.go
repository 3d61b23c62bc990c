package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mfhq/mf/internal/freeport"
)

// The end-to-end tests of this package run the real mf binary, built once
// by TestMain, and talk to it over HTTP.

var mfBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mf-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "cannot make a directory for the test binary:", err)
		os.Exit(1)
	}
	mfBinary = filepath.Join(dir, "mf")
	build := exec.Command("go", "build", "-o", mfBinary, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "cannot build mf for the end-to-end tests:", err)
		os.Exit(1)
	}
	stopFaultBuild := startFaultBuild(dir)
	code := m.Run()
	stopFaultBuild()
	os.RemoveAll(dir)
	os.Exit(code)
}

// mfProc is one running mf process.
type mfProc struct {
	t                         testing.TB
	cmd                       *exec.Cmd
	data                      string
	ingest, api, admin        string // base URLs, http://host:port
	ingestAddr, apiAddr, admn string
	out                       *syncBuffer
	done                      chan struct{}
	exitErr                   error
	// only, when set, lists the base URLs that must answer /healthz (a
	// role run apart listens on some of the three only).
	only []string
}

// syncBuffer collects a process's output for failure messages.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// freeAddr returns a loopback address with a port that was free a moment
// ago, from below the ephemeral range (see package freeport).
func freeAddr(t testing.TB) string {
	t.Helper()
	a, err := freeport.Addr()
	if err != nil {
		t.Fatalf("cannot find a free port: %v", err)
	}
	return a
}

// startMF starts `mf <command>` on data with fresh ports and extra flags, and
// waits until every listener answers /healthz with 200.
func startMF(t testing.TB, data string, command string, extra ...string) *mfProc {
	t.Helper()
	return startMFBin(t, mfBinary, nil, data, command, extra...)
}

// startMFBin is startMF with another build of mf (the fault build) and
// variables added to the environment.
func startMFBin(t testing.TB, bin string, env []string, data string, command string, extra ...string) *mfProc {
	t.Helper()
	p := &mfProc{t: t, data: data, out: &syncBuffer{}, done: make(chan struct{})}
	p.ingestAddr, p.apiAddr, p.admn = freeAddr(t), freeAddr(t), freeAddr(t)
	p.ingest, p.api, p.admin = "http://"+p.ingestAddr, "http://"+p.apiAddr, "http://"+p.admn
	args := append([]string{command, "--data", data,
		"--ingest-addr", p.ingestAddr, "--api-addr", p.apiAddr, "--admin-addr", p.admn}, extra...)
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.Env = append(append(os.Environ(), "MF_LOG_LEVEL=debug"), env...)
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("cannot start mf: %v", err)
	}
	go func() { p.exitErr = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.kill() })
	p.waitHealthy(60 * time.Second)
	return p
}

func (p *mfProc) waitHealthy(within time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(within)
	bases := []string{p.ingest, p.api, p.admin}
	if p.only != nil {
		bases = p.only
	}
	for _, base := range bases {
		for {
			select {
			case <-p.done:
				p.t.Fatalf("mf exited before it was healthy (%v); output:\n%s", p.exitErr, p.out)
			default:
			}
			resp, err := http.Get(base + "/healthz")
			if err == nil {
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 && strings.TrimSpace(string(body)) == `{"status":"ok"}` {
					break
				}
			}
			if time.Now().After(deadline) {
				p.t.Fatalf("%s/healthz not healthy within %v (last error %v); output:\n%s", base, within, err, p.out)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// kill ends the process at once (SIGKILL), as a crash would.
func (p *mfProc) kill() {
	if p.cmd.Process == nil {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop sends SIGTERM and returns the exit code.
func (p *mfProc) stop(within time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
		p.t.Logf("mf had exited before SIGTERM (%v)", p.exitErr)
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(within):
		// Its goroutines, to tell where it hangs (the runtime prints
		// them on SIGQUIT and exits).
		_ = p.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
		}
		p.kill()
		p.t.Fatalf("mf did not exit within %v of SIGTERM; output (with its goroutines after SIGQUIT):\n%s", within, p.out)
	}
	code := p.cmd.ProcessState.ExitCode()
	if code != 0 {
		p.t.Logf("mf exited %d on SIGTERM; the end of its output:\n%s", code, tail(p.out.String(), 6000))
	}
	return code
}

// do sends one HTTP request and returns status, headers and body.
func do(t testing.TB, method, url string, body []byte, header ...string) (int, http.Header, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		t.Fatalf("cannot build request %s %s: %v", method, url, err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, url, err)
	}
	return resp.StatusCode, resp.Header, b
}

// runMF runs one short mf command to completion.
func runMF(t testing.TB, stdin []byte, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(mfBinary, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	err := cmd.Run()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("cannot run mf %v: %v", args, err)
		}
	}
	return cmd.ProcessState.ExitCode(), o.String(), e.String()
}

// startMFAt starts mf on the given ingest, api and admin addresses (to
// restart a killed process where its clients expect it).
func startMFAt(t testing.TB, data string, addrs []string, command string, extra ...string) *mfProc {
	t.Helper()
	p := &mfProc{t: t, data: data, out: &syncBuffer{}, done: make(chan struct{})}
	p.ingestAddr, p.apiAddr, p.admn = addrs[0], addrs[1], addrs[2]
	p.ingest, p.api, p.admin = "http://"+p.ingestAddr, "http://"+p.apiAddr, "http://"+p.admn
	args := append([]string{command, "--data", data,
		"--ingest-addr", p.ingestAddr, "--api-addr", p.apiAddr, "--admin-addr", p.admn}, extra...)
	p.cmd = exec.Command(mfBinary, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("cannot start mf: %v", err)
	}
	go func() { p.exitErr = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.kill() })
	p.waitHealthy(60 * time.Second)
	return p
}

// tryDo is do without failing the test on a transport error.
func tryDo(method, url string, body []byte, header ...string) (int, http.Header, []byte, error) {
	return tryDoWithin(10*time.Second, method, url, body, header...)
}

// tryDoWithin is tryDo with a time limit of its own.
func tryDoWithin(limit time.Duration, method, url string, body []byte, header ...string) (int, http.Header, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b, err
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, within time.Duration, cond func() bool) {
	t.Helper()
	waitForEvery(t, within, 20*time.Millisecond, cond)
}

// waitForEvery is waitFor polling every pause (a rate-limited API).
func waitForEvery(t testing.TB, within, pause time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", within)
		}
		time.Sleep(pause)
	}
}

// tail returns the last n bytes of s, cut at a line start.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// overviewNumbers reads the demo project's key numbers of the last 24
// hours from the reporting API at api, by key.
func overviewNumbers(t testing.TB, api string) map[string]any {
	t.Helper()
	code, _, b := do(t, "GET", api+"/api/v1/projects/"+demoProject+"/overview?period=24h", nil, "Authorization", "Bearer "+demoPAT)
	if code != 200 {
		t.Fatalf("overview: %d %s", code, b)
	}
	var doc struct {
		Data struct {
			Attributes struct {
				Numbers []struct {
					Key   string
					Value any
				}
			}
		}
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	for _, n := range doc.Data.Attributes.Numbers {
		out[n.Key] = n.Value
	}
	return out
}
