package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// mfBinary is the real mf, built once by TestMain for TestSoakShort.
var mfBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mf-soak-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "cannot make a directory for the mf binary:", err)
		os.Exit(1)
	}
	mfBinary = filepath.Join(dir, "mf")
	build := exec.Command("go", "build", "-o", mfBinary, "../../../cmd/mf")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "cannot build mf:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// TestSoakShort runs the soak for a few seconds at a low rate against the
// real mf serve: a table line per sample, the drain, and the reporting
// API's count of every accepted event (the command exits 0 only then).
func TestSoakShort(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	code := run(ctx, []string{"-mf", mfBinary, "-provision", "../../../docs/demo-provision.json",
		"-rate", "1000", "-duration", "4s", "-sample", "1s", "-browsers", "400", "-conns", "8", "-drain", "2m"}, &out, &errOut)
	t.Logf("soak output:\n%s", out.String())
	if code != 0 {
		t.Fatalf("soak exited %d; stderr:\n%s", code, errOut.String())
	}
	text := out.String()
	loads := strings.Count(text, "\nload ")
	if loads < 3 || !strings.Contains(text, "\ndrain ") {
		t.Errorf("want a load line per second and a drain line, got %d load lines", loads)
	}
	for _, want := range []string{"ingest latency: p50", "RSS: ", "processor lag: max",
		"count check: every accepted event is counted by the reporting API"} {
		if !strings.Contains(text, want) {
			t.Errorf("the output lacks %q", want)
		}
	}
}

// TestUsage: bad flags are a usage error (2) before anything starts.
func TestUsage(t *testing.T) {
	for _, args := range [][]string{{"-rate", "0"}, {"-batch", "1001"}, {"-browsers", "10", "-conns", "20"},
		{"-warmup", "1h", "-duration", "10m"}, {"-sample", "1ms"}, {"extra"}} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), args, &out, &errOut); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errOut.String())
		}
	}
}
