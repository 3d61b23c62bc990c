package wasm

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/tetratelabs/wazero"
)

// Size targets of the issue: the module at most 2.4 MB raw and 700 KB
// gzipped.
const (
	maxRaw  = 2_400_000
	maxGzip = 700_000
)

// TestDistIsFresh rebuilds the module and its compressed variants and
// fails when the committed files in dist/ differ: run `go generate ./wasm`
// (go tool task wasm) after changing the guest or the evaluator.
func TestDistIsFresh(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "run", "./internal/gen", "-dir", dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cannot rebuild the module: %v\n%s", err, out)
	}
	for _, name := range []string{"evaluator.wasm", "evaluator.wasm.gz", "evaluator.wasm.br"} {
		built, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		committed, err := os.ReadFile(filepath.Join("dist", name))
		if err != nil {
			t.Fatalf("dist/%s is missing: run go generate ./wasm (go tool task wasm): %v", name, err)
		}
		if !bytes.Equal(built, committed) {
			t.Errorf("dist/%s is out of date (%d bytes committed, %d built from the sources): run go generate ./wasm (go tool task wasm)",
				name, len(committed), len(built))
		}
	}
}

// TestModuleFile checks what Module returns for serving: the hash, the
// encodings (which must decompress to the module), and the size targets.
func TestModuleFile(t *testing.T) {
	m := Module()
	sum := sha256.Sum256(m.Raw)
	if want := hex.EncodeToString(sum[:16]); m.Hash != want {
		t.Errorf("Hash = %q, want %q", m.Hash, want)
	}
	if m.Name() != m.Hash+".wasm" || m.ContentType != "application/wasm" {
		t.Errorf("Name() = %q, ContentType = %q", m.Name(), m.ContentType)
	}
	if m.ETag("") == m.ETag("br") || m.ETag("br") == m.ETag("gzip") {
		t.Errorf("the entity tags of the encodings must differ: %s %s %s", m.ETag(""), m.ETag("gzip"), m.ETag("br"))
	}
	gz, err := gzip.NewReader(bytes.NewReader(m.Gzip))
	if err != nil {
		t.Fatalf("Gzip is not gzip: %v", err)
	}
	if b, err := io.ReadAll(gz); err != nil || !bytes.Equal(b, m.Raw) {
		t.Errorf("Gzip does not decompress to the module (err %v)", err)
	}
	if b, err := io.ReadAll(brotli.NewReader(bytes.NewReader(m.Brotli))); err != nil || !bytes.Equal(b, m.Raw) {
		t.Errorf("Brotli does not decompress to the module (err %v)", err)
	}
	t.Logf("evaluator.wasm: %d bytes raw, %d gzip, %d brotli", len(m.Raw), len(m.Gzip), len(m.Brotli))
	if len(m.Raw) > maxRaw || len(m.Gzip) > maxGzip {
		t.Errorf("the module is %d bytes raw and %d gzipped; the targets are %d and %d", len(m.Raw), len(m.Gzip), maxRaw, maxGzip)
	}
}

func TestNegotiate(t *testing.T) {
	var cases []struct {
		Header string `json:"header"`
		Want   string `json:"want"`
	}
	b, err := os.ReadFile("testdata/accept_encoding.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	m := Module()
	bodies := map[string][]byte{"": m.Raw, "gzip": m.Gzip, "br": m.Brotli}
	for _, c := range cases {
		body, enc := m.Negotiate(c.Header)
		if enc != c.Want || !bytes.Equal(body, bodies[c.Want]) {
			t.Errorf("Accept-Encoding %q: got %q (%d bytes), want %q", c.Header, enc, len(body), c.Want)
		}
	}
}

// TestImportsMatchShim lists the module's imports and checks that the
// browser module's WASI shim implements exactly those.
func TestImportsMatchShim(t *testing.T) {
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(compileCache))
	defer r.Close(ctx)
	cm, err := r.CompileModule(ctx, Module().Raw)
	if err != nil {
		t.Fatal(err)
	}
	var imports []string
	for _, f := range cm.ImportedFunctions() {
		mod, name, _ := f.Import()
		if mod != "wasi_snapshot_preview1" {
			t.Errorf("the module imports %s.%s: only WASI preview 1 is provided", mod, name)
		}
		imports = append(imports, name)
	}
	js, err := os.ReadFile("js/evaluator.mjs")
	if err != nil {
		t.Fatal(err)
	}
	// The shim's functions are the methods of the object wasiImports returns.
	body := js[bytes.Index(js, []byte("function wasiImports(")):]
	body = body[bytes.Index(body, []byte("return {")):]
	body = body[:bytes.Index(body, []byte("\n  };\n"))]
	var shim []string
	for _, m := range regexp.MustCompile(`(?m)^    ([a-z_]+)\(`).FindAllSubmatch(body, -1) {
		shim = append(shim, string(m[1]))
	}
	slices.Sort(imports)
	slices.Sort(shim)
	t.Logf("imports: %v", imports)
	if !slices.Equal(imports, shim) {
		t.Errorf("the module imports %v; the JavaScript shim implements %v", imports, shim)
	}
	var exports []string
	for name := range cm.ExportedFunctions() {
		exports = append(exports, name)
	}
	slices.Sort(exports)
	want := []string{"_initialize", "mf_eval", "mf_eval_case", "mf_explain_case", "mf_free", "mf_input", "mf_load"}
	if !slices.Equal(exports, want) {
		t.Errorf("the module exports %v, want %v (docs/wasm.md)", exports, want)
	}
}
