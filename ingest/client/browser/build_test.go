package browser

import (
	"bytes"
	"compress/gzip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The npm tools the tests use (terser, typescript), installed by
// `npm ci` in this directory (.ci/tools.sh).
func npmTool(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join("node_modules", ".bin", name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is missing: run bash .ci/tools.sh (npm ci in ingest/client/browser)", p)
	}
	return p
}

// TestDistIsFresh: dist/mf.mjs is what scripts/build.mjs makes of mf.mjs
// now (after a change to mf.mjs: npm run build).
func TestDistIsFresh(t *testing.T) {
	npmTool(t, "terser")
	var out, errOut bytes.Buffer
	cmd := exec.Command("node", "scripts/build.mjs", "--check")
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("build: %v\n%s", err, errOut.Bytes())
	}
	if !bytes.Equal(out.Bytes(), Minified) {
		t.Fatal("dist/mf.mjs is not the build of mf.mjs: run `npm run build` in ingest/client/browser")
	}
	t.Log(errOut.String())
}

// TestTypes checks mf.d.mts against example.ts, which uses every method
// and option, with tsc --noEmit.
func TestTypes(t *testing.T) {
	tsc := npmTool(t, "tsc")
	out, err := exec.Command("node", tsc, "--noEmit", "-p", "tsconfig.json").CombinedOutput()
	if err != nil {
		t.Fatalf("tsc --noEmit: %v\n%s", err, out)
	}
}

// maxServedGzip is the size budget of the served module, gzipped, without
// the evaluator (which loads only when a flag is evaluated).
const maxServedGzip = 6 * 1024

// TestSize prints the module's sizes and holds the served one to its budget.
func TestSize(t *testing.T) {
	gz := func(b []byte) int {
		var buf bytes.Buffer
		w, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		w.Write(b)
		w.Close()
		return buf.Len()
	}
	t.Logf("mf.mjs %d bytes, %d gzip; served (minified) %d bytes, %d gzip", len(Source), gz(Source), len(Minified), gz(Minified))
	if n := gz(Minified); n > maxServedGzip {
		t.Errorf("the served module is %d bytes gzipped, over its budget of %d", n, maxServedGzip)
	}
}
