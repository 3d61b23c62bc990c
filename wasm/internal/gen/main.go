// Command gen builds the WebAssembly evaluator (package wasm/guest) and its
// precompressed variants into a directory: evaluator.wasm, evaluator.wasm.gz
// and evaluator.wasm.br. `go generate ./wasm` (and so `go tool task wasm`)
// runs it with -dir dist; the freshness test runs it into a temporary
// directory and compares.
//
// The build is reproducible: the same Go toolchain and sources give the same
// bytes (-trimpath, -buildvcs=false, a fixed environment, deterministic
// compressors without timestamps).
package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/andybalholm/brotli"
)

// guestPackage is the reactor's import path: go build resolves it from any
// directory inside the module.
const guestPackage = "github.com/mfhq/mf/wasm/guest"

func main() {
	dir := flag.String("dir", "dist", "directory to write evaluator.wasm, .wasm.gz and .wasm.br into")
	flag.Parse()
	if err := run(context.Background(), *dir); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("cannot resolve output directory: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cannot create output directory: %w", err)
	}
	raw := filepath.Join(dir, "evaluator.wasm")
	if err := build(ctx, raw); err != nil {
		return err
	}
	module, err := os.ReadFile(raw)
	if err != nil {
		return fmt.Errorf("cannot read the built module: %w", err)
	}
	gz, err := gzipBytes(module)
	if err != nil {
		return fmt.Errorf("cannot gzip the module: %w", err)
	}
	br, err := brotliBytes(module)
	if err != nil {
		return fmt.Errorf("cannot brotli-compress the module: %w", err)
	}
	if err := os.WriteFile(raw+".gz", gz, 0o644); err != nil {
		return fmt.Errorf("cannot write %s.gz: %w", raw, err)
	}
	if err := os.WriteFile(raw+".br", br, 0o644); err != nil {
		return fmt.Errorf("cannot write %s.br: %w", raw, err)
	}
	fmt.Printf("evaluator.wasm: %d bytes raw, %d gzip, %d brotli\n", len(module), len(gz), len(br))
	return nil
}

// build runs go build for wasip1 with a fixed environment so that nothing
// from the caller's shell (GOFLAGS, GOWASM, CGO) changes the bytes.
func build(ctx context.Context, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build",
		"-buildmode=c-shared", "-trimpath", "-buildvcs=false",
		"-ldflags=-s -w", "-o", out, guestPackage)
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "GOOS", "GOARCH", "GOWASM", "GOFLAGS", "CGO_ENABLED", "GOEXPERIMENT":
			continue
		}
		env = append(env, kv)
	}
	cmd.Env = append(env, "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0", "GOFLAGS=")
	var stderr bytes.Buffer
	cmd.Stdout = os.Stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("cannot build %s for wasip1: %w\n%s", guestPackage, err, stderr.Bytes())
	}
	return nil
}

// gzipBytes compresses at the best level with an empty header (no name, no
// time), so the output depends on the input only.
func gzipBytes(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// brotliBytes compresses at quality 11 with a 16 MiB window (the module is
// smaller, so the whole file is one window).
func brotliBytes(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	bw := brotli.NewWriterOptions(&buf, brotli.WriterOptions{Quality: 11, LGWin: 24})
	if _, err := bw.Write(b); err != nil {
		return nil, err
	}
	if err := bw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
