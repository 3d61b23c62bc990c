package layering

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/mfhq/mf/"

// TestImportsPointDown lists, with go list, every package of mf each
// top-level package's tree depends on, and fails for one the table does
// not allow.
func TestImportsPointDown(t *testing.T) {
	raw, err := os.ReadFile("testdata/imports.json")
	if err != nil {
		t.Fatal(err)
	}
	var allowed map[string]any
	if err := json.Unmarshal(raw, &allowed); err != nil {
		t.Fatalf("testdata/imports.json: %v", err)
	}
	// Packages every package may import: those under internal/ that stand
	// for no layer (the test stack); what they import is listed by go list
	// with the importer's dependencies, and checked with them.
	var anyone []string
	for _, x := range allowed["*"].([]any) {
		anyone = append(anyone, x.(string))
	}
	for top, v := range allowed {
		if top == "_" || top == "*" {
			continue
		}
		var may []string
		for _, x := range v.([]any) {
			may = append(may, x.(string))
		}
		may = append(may, top)
		t.Run(top, func(t *testing.T) {
			cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{.Standard}}", "../../"+top+"/...")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("go list: %v: %s", err, stderr.String())
			}
			sc := bufio.NewScanner(bytes.NewReader(out))
			n := 0
			for sc.Scan() {
				path, _, _ := strings.Cut(sc.Text(), " ")
				rest, ok := strings.CutPrefix(path, module)
				if !ok {
					continue
				}
				n++
				first, _, _ := strings.Cut(rest, "/")
				if !slices.Contains(may, first) && !slices.Contains(anyone, rest) {
					t.Errorf("%s depends on %s; it may import %v only", top, path, may[:len(may)-1])
				}
			}
			if n == 0 {
				t.Fatalf("go list found no package of %s", top)
			}
		})
	}
}
